"""Text-file helpers of the data and dictionary tests."""

import gzip

# Every character at which str.splitlines() breaks but a '\n'-separated text file does not.
SPLITLINES_ONLY_BREAKS = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


def write_bytes(path, data: bytes, compress=False):
    """Writes `data` to `path`, gzip-compressed if `compress`; returns the path as text."""
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(data)
    return str(path)
