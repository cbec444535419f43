"""Reading parallel text files: `PREFIX.LANG` (plain or gzip) aligned line by line.

Lines are split on '\\n' only (a trailing '\\r' is dropped), exactly like
`tf.data.TextLineDataset` and SentencePiece read them, so that no Unicode line separator
(U+2028, U+0085, ...) inside a sentence can shift one side against the other. Two things
differ from `TextLineDataset`, for files it would misread: a UTF-8 byte order mark
opening a file is not part of its first line, and a file without any '\\n' but with
'\\r' (classic Mac OS line endings) is split on '\\r'. A line longer than
`MAX_LINE_BYTES` is refused with its file and number (`LineTooLongError`).
"""

import collections
import gzip
import io
import itertools
import os
from collections.abc import Iterator
from typing import NoReturn

from convs2s_tf.data.errors import CorpusFileNotFoundError, InvalidUtf8Error, LineCountMismatchError

INVALID_UTF8_POLICIES = ("error", "replace")

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"

# Far longer than any sentence, and a bound on the memory one line takes: a file whose
# line breaks were lost (or that is no text at all) fails here, not by exhausting memory.
MAX_LINE_BYTES = 64 << 20
_BLOCK_BYTES = 1 << 20
# How far past a file's first '\r' a '\n' may come for the file to count as '\n'-ended.
_CR_LOOKAHEAD_BYTES = 1 << 20


class LineTooLongError(ValueError):
    """A line of a text file is longer than `MAX_LINE_BYTES`."""


class LineDecoder:
    """Decodes raw lines as UTF-8, failing or replacing (and counting) invalid ones.

    Attributes:
        invalid_utf8: "error" raises `InvalidUtf8Error` naming the origin and line number;
            "replace" substitutes U+FFFD for invalid bytes and counts the line.
        replaced_lines: number of lines with replaced bytes, per origin (file name).
    """

    def __init__(self, invalid_utf8: str = "error"):
        if invalid_utf8 not in INVALID_UTF8_POLICIES:
            raise ValueError(
                f"invalid_utf8 must be one of {INVALID_UTF8_POLICIES}, got {invalid_utf8!r}."
            )
        self.invalid_utf8 = invalid_utf8
        self.replaced_lines: collections.Counter[str] = collections.Counter()

    def decode(self, raw_line: bytes, origin: str, line_number: int) -> str:
        """Returns `raw_line` decoded; `origin` and `line_number` (1-based) locate errors."""
        try:
            return raw_line.decode("utf-8")
        except UnicodeDecodeError as error:
            if self.invalid_utf8 == "error":
                raise InvalidUtf8Error(
                    f"{origin}, line {line_number}: invalid UTF-8 at byte {error.start} "
                    f"({error.reason}). Fix the file, or pass `invalid_utf8='replace'` to "
                    "replace invalid bytes with U+FFFD and count the lines."
                ) from error
            self.replaced_lines[origin] += 1
            return raw_line.decode("utf-8", errors="replace")


def split_lines(text: str) -> list[str]:
    """Splits `text` into lines at '\\n' only, like `tf.data.TextLineDataset`.

    Unlike `str.splitlines()`, which also breaks at '\\r', '\\x0b', '\\x0c', '\\x1c'-'\\x1e',
    U+0085, U+2028 and U+2029, this keeps such characters inside their line, so one input
    line always gives one output line and translations stay aligned with their sources.

    As files are read (`iter_raw_lines`), a byte order mark (U+FEFF) opening the text is
    dropped, and a text without '\\n' but with '\\r' is split on '\\r'.

    Args:
        text: the text; a final '\\n' is optional.

    Returns:
        The lines without their '\\n', each with one trailing '\\r' removed (so '\\r\\n'
        endings give clean lines). Only the empty piece after a final '\\n' is dropped:
        "a\\nb\\n" and "a\\nb" give ["a", "b"], "a\\n\\nb" gives ["a", "", "b"], "" gives [].
    """
    text = text.removeprefix("\ufeff")
    separator = "\r" if "\n" not in text and "\r" in text else "\n"
    lines = text.split(separator)
    if lines[-1] == "":
        # The piece after a final separator (or all of an empty text) is not a line.
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_lines(path: str, invalid_utf8: str = "replace") -> list[str]:
    """Returns the lines of the text file `path` (plain or gzip), split as by `split_lines`.

    Args:
        path: the file to read.
        invalid_utf8: "replace" (the default, as the translate and evaluate pipelines
            decode their inputs) substitutes U+FFFD for invalid bytes; "error" raises
            `InvalidUtf8Error` naming the file and line (see `LineDecoder`).

    Raises:
        CorpusFileNotFoundError: `path` does not exist.
        InvalidUtf8Error: a line is not UTF-8 and `invalid_utf8` is "error".
    """
    decoder = LineDecoder(invalid_utf8)
    return [
        decoder.decode(raw_line, path, line_number)
        for line_number, raw_line in enumerate(iter_raw_lines(path), start=1)
    ]


def resolve_corpus_file(prefix: str, language: str) -> str:
    """Returns the existing file for `prefix` and `language`: `PREFIX.LANG` or `PREFIX.LANG.gz`.

    Raises:
        CorpusFileNotFoundError: naming the path(s) looked for.
    """
    plain_path = f"{prefix}.{language}"
    candidates = [plain_path, plain_path + ".gz"]
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise CorpusFileNotFoundError(
        f"Corpus file not found: {plain_path} (also looked for {plain_path}.gz)."
    )


def open_text_file(path: str) -> io.BufferedIOBase:
    """Opens `path` for reading bytes, decompressing it if it is gzip (by content, not name)."""
    if not os.path.isfile(path):
        raise CorpusFileNotFoundError(f"Corpus file not found: {path}.")
    with open(path, "rb") as probe:
        is_gzip = probe.read(2) == _GZIP_MAGIC
    return gzip.open(path, "rb") if is_gzip else open(path, "rb")


def iter_raw_lines(path: str, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """Yields the lines of `path` as bytes without their '\\n' (or '\\r\\n') ending.

    A UTF-8 byte order mark opening the file is dropped; a file without '\\n' but with
    '\\r' is split on '\\r'. Time and memory are linear in the file's size, and at most
    one line (bounded by `max_line_bytes`) is held at a time.

    Raises:
        CorpusFileNotFoundError: `path` does not exist.
        LineTooLongError: a line is longer than `max_line_bytes` (file and line named).
    """
    with open_text_file(path) as text_file:
        # Blocks of a BufferedReader are whole (short only at the end of the file), and
        # splitting each on the separator (not readline()) keeps reading fast.
        blocks = iter(lambda: text_file.read(_BLOCK_BYTES), b"")
        head, separator = _read_head(blocks, max_line_bytes)
        yield from _split_blocks(itertools.chain(head, blocks), separator, path, max_line_bytes)


def _read_head(blocks: Iterator[bytes], max_line_bytes: int) -> tuple[list[bytes], bytes]:
    """Reads the first blocks of a file until its line separator is known.

    Returns:
        The blocks read (the byte order mark removed) and the separator: b"\\n", or
        b"\\r" if no '\\n' follows the first '\\r' within `_CR_LOOKAHEAD_BYTES` (a
        lone '\\r' inside a line of an ordinary file stays in its line).
    """
    head: list[bytes] = []
    size = 0
    first_cr = -1
    for block in blocks:
        if not head and block.startswith(_UTF8_BOM):
            block = block[len(_UTF8_BOM) :]
        head.append(block)
        if b"\n" in block:
            return head, b"\n"
        if first_cr < 0 and (found := block.find(b"\r")) >= 0:
            first_cr = size + found
        size += len(block)
        if first_cr >= 0 and size - first_cr > _CR_LOOKAHEAD_BYTES:
            return head, b"\r"
        if first_cr < 0 and size > max_line_bytes:
            return head, b"\n"  # the first line is too long: `_split_blocks` says so
    return head, b"\r" if first_cr >= 0 else b"\n"


def _split_blocks(
    blocks: Iterator[bytes], separator: bytes, origin: str, max_line_bytes: int
) -> Iterator[bytes]:
    """Yields the lines of consecutive `blocks` split on `separator` (and without one
    trailing '\\r' if that is b"\\n"), in time linear in their size."""
    unfinished: list[bytes] = []  # the pieces of a line that spans blocks
    unfinished_size = 0
    line_number = 1
    for block in blocks:
        pieces = block.split(separator)
        for line in itertools.islice(pieces, len(pieces) - 1):
            if unfinished:
                # Joined once, when the line ends: concatenating block by block would
                # copy a long line once per block.
                unfinished.append(line)
                line = b"".join(unfinished)
                unfinished, unfinished_size = [], 0
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > max_line_bytes:
                _line_too_long(origin, line_number, max_line_bytes)
            yield line
            line_number += 1
        if pieces[-1]:
            unfinished.append(pieces[-1])
            unfinished_size += len(pieces[-1])
            if unfinished_size > max_line_bytes + 1:  # + a '\r' it may end with
                _line_too_long(origin, line_number, max_line_bytes)
    if unfinished:
        line = b"".join(unfinished)
        yield line[:-1] if line.endswith(b"\r") else line


def _line_too_long(origin: str, line_number: int, max_line_bytes: int) -> NoReturn:
    raise LineTooLongError(
        f"{origin}, line {line_number}: longer than {max_line_bytes} bytes "
        "(MAX_LINE_BYTES); a corpus holds one sentence per line."
    )


def read_parallel_lines(
    source_path: str, target_path: str, decoder: LineDecoder
) -> Iterator[tuple[str, str]]:
    """Yields aligned (source, target) lines of two files.

    Raises:
        CorpusFileNotFoundError: a file does not exist (named).
        LineCountMismatchError: the files have different line counts (both named, with
            both counts), detected when the shorter one ends.
        InvalidUtf8Error: a line is not UTF-8 and `decoder` is strict (file and line).
    """
    for path in (source_path, target_path):
        if not os.path.isfile(path):
            raise CorpusFileNotFoundError(f"Corpus file not found: {path}.")
    source_lines = iter_raw_lines(source_path)
    target_lines = iter_raw_lines(target_path)
    line_number = 0
    while True:
        raw_source = next(source_lines, None)
        raw_target = next(target_lines, None)
        if raw_source is None or raw_target is None:
            break
        line_number += 1
        yield (
            decoder.decode(raw_source, source_path, line_number),
            decoder.decode(raw_target, target_path, line_number),
        )
    if raw_source is not None or raw_target is not None:
        # One side ended first: count what is left of the other for the message.
        source_count = line_number + (raw_source is not None) + sum(1 for _ in source_lines)
        target_count = line_number + (raw_target is not None) + sum(1 for _ in target_lines)
        raise LineCountMismatchError(
            f"Line counts differ: {source_path} has {source_count} lines, "
            f"{target_path} has {target_count} lines."
        )
