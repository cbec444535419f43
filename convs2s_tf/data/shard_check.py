"""Checking prepared shards against their lengths index before a run reads them.

A shard that is missing, cut short, overwritten or not the one its index describes
would otherwise show up as a `DataLossError` at the same point of every epoch (a
restart loop), or as epochs silently padded or cut to the index's counts. The index
records each shard's size and SHA-256 as written (`length_index`), and a run's start
compares them with the files:

- sizes, always: one `stat` a shard;
- checksums, when the shards checked total at most `DEFAULT_CHECKSUM_LIMIT_BYTES`
  (2 GiB). WMT14 en-de's training shards (about 1 GB) hash in under a second from the
  page cache and in seconds from a local disk. WMT14 en-fr's (about 9 GB) would cost
  every worker a minute or more from a shared filesystem at every restart of a
  preemptible run, so above the limit only sizes are checked there, and TFRecord's
  per-record CRC32C still guards each record as it is read. `check_shards` with
  `checksum_limit_bytes=None` checks every checksum whatever the size.

A mismatch raises `CorruptShardError`: one line naming the shard and the command that
prepares the data again.
"""

import hashlib
import os
from collections.abc import Sequence

from convs2s_tf.data.errors import CorruptShardError
from convs2s_tf.data.length_index import LengthIndex

DEFAULT_CHECKSUM_LIMIT_BYTES = 2 << 30
_READ_BYTES = 1 << 22


def file_sha256(path: str) -> str:
    """Returns the SHA-256 (hex) of the file at `path`."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(_READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


def reprepare_command(shard_path: str) -> str:
    """Returns the command that prepares again the data directory holding `shard_path`
    (its version folder's parent, see `publication`)."""
    folder = os.path.dirname(os.path.abspath(shard_path))
    data_dir = (
        os.path.dirname(folder) if os.path.basename(folder).startswith("prepared-") else folder
    )
    return (
        f"python -m pipelines.prepare_data --data_dir={data_dir} --force_prepare "
        "(with the flags that prepared it)"
    )


def check_shards(
    paths: Sequence[str],
    index: LengthIndex,
    checksum_limit_bytes: int | None = DEFAULT_CHECKSUM_LIMIT_BYTES,
) -> bool:
    """Checks that `paths` are the shards `index` describes.

    Args:
        paths: the split's shards, in shard order.
        index: their lengths index.
        checksum_limit_bytes: compare checksums too if the shards total at most this
            many bytes (None: always; 0: never).

    Returns:
        Whether the checksums were compared (the sizes always are).

    Raises:
        CorruptShardError: a shard is missing, or its name, size or checksum is not
            the index's.
    """
    if len(paths) != index.num_shards:
        raise CorruptShardError(
            f"{len(paths)} shards for a lengths index of {index.num_shards}; prepare the "
            f"data again: {reprepare_command(paths[0]) if paths else 'pipelines.prepare_data'}."
        )
    for path, name, size in zip(paths, index.files, index.file_bytes.tolist()):
        problem = None
        if os.path.basename(path) != os.path.basename(name):
            problem = f"is not the lengths index's shard {name}"
        else:
            try:
                actual = os.stat(path).st_size
            except FileNotFoundError:
                problem = "is missing"
            else:
                if actual != size:
                    problem = f"has {actual} bytes, its lengths index says {size}"
        if problem:
            _fail(path, problem)
    total = int(index.file_bytes.sum())
    if checksum_limit_bytes is not None and total > checksum_limit_bytes:
        return False
    for path, expected in zip(paths, index.file_sha256):
        if file_sha256(path) != expected:
            _fail(path, "does not match the checksum in its lengths index (corrupt)")
    return True


def _fail(path: str, problem: str) -> None:
    raise CorruptShardError(
        f"Prepared shard {path} {problem}; prepare the data again: {reprepare_command(path)}."
    )
