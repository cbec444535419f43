"""The lengths index of a prepared split: how many pairs of each length each shard holds.

For every shard it keeps a sparse 2-D histogram: (source length, target length) -> pairs,
lengths counted with `</s>`. That is all batching needs to know in advance (what the
length limits drop, how many batches a bucket makes, how many an epoch has on each
worker), and its size depends on the spread of lengths, not on the number of pairs: a
training run reads it instead of counting through the corpus at every start.

It also records each shard's size and SHA-256 as written, so that a run can check the
shards against it before reading them (`shard_check`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import numpy as np

FILE_SUFFIX = ".lengths.npz"


def shard_file_name(split: str, shard: int, num_shards: int) -> str:
    """Returns the file name of shard `shard` of `num_shards` of `split`."""
    return f"{split}-{shard:05d}-of-{num_shards:05d}.tfrecord"


def index_file_name(split: str) -> str:
    """Returns the file name of `split`'s lengths index."""
    return split + FILE_SUFFIX


@dataclasses.dataclass(frozen=True)
class LengthIndex:
    """Per-shard length histograms of one split.

    Attributes:
        files: the shards' file names, in shard order (relative to the data directory).
        shard: [K] int32, the shard of each histogram row.
        source_length: [K] int32, source length with `</s>`.
        target_length: [K] int32, target length with `</s>`.
        count: [K] int64, pairs of that shard with those lengths.
        file_bytes: [num_shards] int64, each shard's size as written.
        file_sha256: [num_shards] str, each shard's SHA-256 (hex) as written.

    Example:
        index = LengthIndex.load(os.path.join(data_dir, "train.lengths.npz"))
        index.pairs_per_shard()  # [num_shards]
    """

    files: tuple[str, ...]
    shard: np.ndarray
    source_length: np.ndarray
    target_length: np.ndarray
    count: np.ndarray
    file_bytes: np.ndarray
    file_sha256: tuple[str, ...]

    @classmethod
    def from_histograms(
        cls,
        files: Sequence[str],
        histograms: Sequence[dict[tuple[int, int], int]],
        file_bytes: Sequence[int],
        file_sha256: Sequence[str],
    ) -> LengthIndex:
        """Builds the index from one {(source length, target length): pairs} per shard,
        and each shard's size and SHA-256."""
        rows = [
            (shard, source, target, count)
            for shard, histogram in enumerate(histograms)
            for (source, target), count in sorted(histogram.items())
        ]
        table = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
        return cls(
            files=tuple(files),
            shard=table[:, 0].astype(np.int32),
            source_length=table[:, 1].astype(np.int32),
            target_length=table[:, 2].astype(np.int32),
            count=table[:, 3],
            file_bytes=np.asarray(file_bytes, dtype=np.int64).reshape(len(files)),
            file_sha256=tuple(file_sha256),
        )

    @classmethod
    def load(cls, path: str) -> LengthIndex:
        """Reads an index written by `save`.

        Raises:
            FileNotFoundError: `path` does not exist (the split was not prepared).
            KeyError: `path` is an index without the shards' sizes and checksums (an
                older preparation's).
        """
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{path} not found: the data directory has no shards of this split; run "
                "`prepare_data` on it."
            )
        with np.load(path, allow_pickle=False) as arrays:
            return cls(
                files=tuple(str(name) for name in arrays["files"]),
                shard=arrays["shard"],
                source_length=arrays["source_length"],
                target_length=arrays["target_length"],
                count=arrays["count"],
                file_bytes=arrays["file_bytes"],
                file_sha256=tuple(str(digest) for digest in arrays["file_sha256"]),
            )

    def save(self, path: str) -> None:
        """Writes the index through a temporary name, renamed once complete."""
        temporary = path + ".tmp.npz"
        np.savez(
            temporary,
            files=np.asarray(self.files, dtype=str),
            shard=self.shard,
            source_length=self.source_length,
            target_length=self.target_length,
            count=self.count,
            file_bytes=self.file_bytes,
            file_sha256=np.asarray(self.file_sha256, dtype=str),
        )
        os.replace(temporary, path)

    @property
    def num_shards(self) -> int:
        return len(self.files)

    @property
    def pairs(self) -> int:
        return int(self.count.sum())

    def pairs_per_shard(self) -> np.ndarray:
        """Returns [num_shards] int64: the pairs in each shard."""
        return np.bincount(self.shard, weights=self.count, minlength=self.num_shards).astype(
            np.int64
        )

    def rows_of(self, shards: Sequence[int]) -> np.ndarray:
        """Returns a boolean mask of the histogram rows of `shards`."""
        return np.isin(self.shard, np.asarray(list(shards), dtype=np.int32))
