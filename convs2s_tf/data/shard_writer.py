"""Writing a prepared split as tokenised, shuffled TFRecord shards and its lengths index.

Two passes over the split's prepared text, with memory bounded by one shard:

1. Tokenise blocks of pairs in `workers` processes (SentencePiece only; see `records`)
   and send each pair to a seeded random shard, appending it to that shard's scratch
   file; count lengths per shard and tokens per side on the way.
2. Shuffle each shard in memory (seeded) and write it as `{split}-NNNNN-of-MMMMM.tfrecord`.

A random shard for every pair, then a random order within each shard, is a uniform
global shuffle, done once here instead of through a corpus-sized buffer at every
training start. Evaluation splits keep their order (they are batched by length anyway).

Each shard's size and SHA-256 go into the lengths index, so a run can check the shards
before reading them (`shard_check`). The directory written to belongs to this preparer
alone (`publication`): no other process writes these names.
"""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing
import os
import struct
from collections.abc import Iterator

import numpy as np
import sentencepiece as spm

from convs2s_tf import vocabulary
from convs2s_tf.data import records, statistics
from convs2s_tf.data.length_index import LengthIndex, index_file_name, shard_file_name
from convs2s_tf.data.shard_check import file_sha256

_BLOCK_PAIRS = 5000
# Blocks handed to each worker process at a time.
_BLOCKS_IN_FLIGHT = 4
# Below this many pairs, worker processes cost more to start than they save.
_MIN_PAIRS_FOR_WORKERS = 50_000
# Lengths above this share one histogram bin per side in the summary's percentiles.
_MAX_SUMMARY_LENGTH = 4096
_SCRATCH_HEADER = struct.Struct("<I")

# A worker process's encoder: set once per process by `_start_worker`.
_worker_encoder: "_BlockEncoder | None" = None


# A tokenised block: records, (source, target) lengths with `</s>`, and per side (words,
# unknown pieces, lengths without `</s>`).
_EncodedBlock = tuple[
    list[bytes], tuple[np.ndarray, np.ndarray], dict[str, tuple[int, int, np.ndarray]]
]


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """How to write one split.

    Attributes:
        split: the split's name ("train", "validation", "test").
        source_path: its prepared source text.
        target_path: its prepared target text, aligned.
        num_shards: shards to write.
        evaluation: keep the order and store the text in the records.
        seed: seed of the shard assignment and of the shuffle within shards.
    """

    split: str
    source_path: str
    target_path: str
    num_shards: int = 1
    evaluation: bool = False
    seed: int = 1


@dataclasses.dataclass
class _SideCounts:
    """Token counts of one side, accumulated block by block."""

    words: int = 0
    unk_tokens: int = 0
    length_histogram: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros(_MAX_SUMMARY_LENGTH + 1, np.int64)
    )

    def add(self, words: int, unk_tokens: int, lengths: np.ndarray) -> None:
        self.words += words
        self.unk_tokens += unk_tokens
        self.length_histogram += np.bincount(
            np.minimum(lengths, _MAX_SUMMARY_LENGTH), minlength=_MAX_SUMMARY_LENGTH + 1
        )

    def summary(self) -> dict:
        return statistics.side_statistics_from_histogram(
            self.length_histogram, self.words, self.unk_tokens
        )


def write_shards(
    spec: ShardSpec,
    data_dir: str,
    sentencepiece_model: str,
    workers: int = 1,
    min_pairs_for_workers: int = _MIN_PAIRS_FOR_WORKERS,
) -> dict:
    """Writes `spec.split`'s shards and lengths index into `data_dir`.

    Args:
        spec: the split and how to shard it.
        data_dir: the directory the shards and index go to (this preparer's own).
        sentencepiece_model: path of the SentencePiece model.
        workers: tokenising processes.
        min_pairs_for_workers: smaller splits are tokenised in this process (worker
            processes cost more to start than they save).

    Returns:
        The split's per-side statistics (`statistics.side_statistics_from_histogram`)
        under "source" and "target", and its "shards" (file names).
    """
    files = [shard_file_name(spec.split, i, spec.num_shards) for i in range(spec.num_shards)]
    scratch_paths = [os.path.join(data_dir, name + ".scratch") for name in files]
    histograms: list[dict[tuple[int, int], int]] = [{} for _ in files]
    sides = {"source": _SideCounts(), "target": _SideCounts()}
    rng = np.random.default_rng([spec.seed, len(spec.split), sum(map(ord, spec.split))])
    scratch = [open(path, "wb") for path in scratch_paths]
    try:
        workers = workers if _count_lines(spec.source_path) >= min_pairs_for_workers else 1
        for block in _encoded_blocks(spec, sentencepiece_model, workers):
            encoded, lengths, side_counts = block
            shards = (
                np.zeros(len(encoded), np.int64)
                if spec.num_shards == 1
                else rng.integers(0, spec.num_shards, size=len(encoded))
            )
            for record, shard in zip(encoded, shards):
                scratch[shard].write(_SCRATCH_HEADER.pack(len(record)) + record)
            _count_lengths(histograms, shards, lengths)
            for side, (words, unk_tokens, side_lengths) in side_counts.items():
                sides[side].add(words, unk_tokens, side_lengths)
    finally:
        for file in scratch:
            file.close()
    for shard, (name, scratch_path) in enumerate(zip(files, scratch_paths)):
        _write_shard(scratch_path, os.path.join(data_dir, name), rng, shuffle=not spec.evaluation)
    paths = [os.path.join(data_dir, name) for name in files]
    # Read back, not counted while writing: the checksum is of the bytes on disk.
    sizes = [os.path.getsize(path) for path in paths]
    LengthIndex.from_histograms(files, histograms, sizes, [file_sha256(p) for p in paths]).save(
        os.path.join(data_dir, index_file_name(spec.split))
    )
    return {**{side: counts.summary() for side, counts in sides.items()}, "shards": files}


def _count_lengths(
    histograms: list[dict[tuple[int, int], int]],
    shards: np.ndarray,
    lengths: tuple[np.ndarray, np.ndarray],
) -> None:
    """Adds a block's (shard, source length, target length) counts to `histograms`."""
    source_lengths, target_lengths = lengths
    keys = np.stack([shards, source_lengths, target_lengths], axis=1)
    unique, counts = np.unique(keys, axis=0, return_counts=True)
    for (shard, source, target), count in zip(unique.tolist(), counts.tolist()):
        histogram = histograms[shard]
        histogram[(source, target)] = histogram.get((source, target), 0) + count


def _write_shard(scratch_path: str, path: str, rng: np.random.Generator, shuffle: bool) -> None:
    """Reads a scratch file, shuffles its records and writes them as one TFRecord file."""
    encoded = _read_scratch(scratch_path)
    import tensorflow as tf  # Here, not at import: worker processes must not load TF.

    order = rng.permutation(len(encoded)) if shuffle else range(len(encoded))
    with tf.io.TFRecordWriter(path + ".tmp") as writer:
        for i in order:
            writer.write(encoded[i])
    os.replace(path + ".tmp", path)
    os.remove(scratch_path)


def _read_scratch(path: str) -> list[bytes]:
    """Returns the records of a scratch file; raises OSError if it is cut short."""
    encoded = []
    with open(path, "rb") as file:
        while header := file.read(_SCRATCH_HEADER.size):
            record = b""
            if len(header) == _SCRATCH_HEADER.size:
                (size,) = _SCRATCH_HEADER.unpack(header)
                record = file.read(size)
                if len(record) == size:
                    encoded.append(record)
                    continue
            raise OSError(
                f"{path} is cut short at byte {file.tell()} (record {len(encoded)}): "
                "truncated, or written by another process?"
            )
    return encoded


def _blocks(spec: ShardSpec) -> Iterator[tuple[int, list[str], list[str]]]:
    """Yields (first line index, source lines, target lines) blocks of the split's text."""
    with (
        open(spec.source_path, encoding="utf-8", newline="\n") as source_file,
        open(spec.target_path, encoding="utf-8", newline="\n") as target_file,
    ):
        start, sources, targets = 0, [], []
        for source, target in zip(source_file, target_file):
            sources.append(source.rstrip("\n"))
            targets.append(target.rstrip("\n"))
            if len(sources) == _BLOCK_PAIRS:
                yield start, sources, targets
                start, sources, targets = start + len(sources), [], []
        if sources:
            yield start, sources, targets


def _encoded_blocks(
    spec: ShardSpec, sentencepiece_model: str, workers: int
) -> Iterator[_EncodedBlock]:
    """Yields `_encode_block`'s results in order, from `workers` processes if worth it."""
    arguments = (sentencepiece_model, spec.evaluation)
    if workers <= 1:
        yield from map(_BlockEncoder(*arguments), _blocks(spec))
        return
    # "spawn": the parent has TensorFlow's threads running, which a fork would copy
    # half-way through whatever they were doing.
    context = multiprocessing.get_context("spawn")
    blocks = _blocks(spec)
    with context.Pool(workers, initializer=_start_worker, initargs=arguments) as pool:
        # A few blocks per worker at a time: `imap` alone would read the whole split
        # into its task queue, and memory would grow with the corpus.
        while window := list(itertools.islice(blocks, _BLOCKS_IN_FLIGHT * workers)):
            yield from pool.imap(_encode_in_worker, window, chunksize=1)


def _count_lines(path: str) -> int:
    with open(path, "rb") as file:
        return sum(block.count(b"\n") for block in iter(lambda: file.read(1 << 20), b""))


class _BlockEncoder:
    """Tokenises blocks of pairs with one SentencePiece model (one per process, or one
    per call in this process: preparers in threads of one process share nothing)."""

    def __init__(self, sentencepiece_model: str, evaluation: bool) -> None:
        self.processor = spm.SentencePieceProcessor(model_file=sentencepiece_model)
        self.encoder = records.ExampleEncoder(self.processor.get_piece_size())
        self.evaluation = evaluation

    def __call__(self, block: tuple[int, list[str], list[str]]) -> _EncodedBlock:
        return _encode_block(self, block)


def _start_worker(sentencepiece_model: str, evaluation: bool) -> None:
    global _worker_encoder
    _worker_encoder = _BlockEncoder(sentencepiece_model, evaluation)


def _encode_in_worker(block: tuple[int, list[str], list[str]]) -> _EncodedBlock:
    assert _worker_encoder is not None
    return _worker_encoder(block)


def _encode_block(state: _BlockEncoder, block: tuple[int, list[str], list[str]]) -> _EncodedBlock:
    """Tokenises one block; returns (records, (source lengths, target lengths) with `</s>`,
    {side: (words, unknown pieces, lengths without `</s>`)})."""
    start, sources, targets = block
    source_ids = state.processor.encode(sources)
    target_ids = state.processor.encode(targets)
    encoded = [
        state.encoder.encode(
            source, target, start + i, (sources[i], targets[i]) if state.evaluation else None
        )
        for i, (source, target) in enumerate(zip(source_ids, target_ids))
    ]
    side_counts = {}
    for side, texts, ids in (("source", sources, source_ids), ("target", targets, target_ids)):
        side_counts[side] = (
            sum(len(text.split()) for text in texts),
            sum(row.count(vocabulary.UNK_ID) for row in ids),
            np.fromiter((len(row) for row in ids), np.int64, len(ids)),
        )
    lengths = (side_counts["source"][2] + 1, side_counts["target"][2] + 1)
    return encoded, lengths, side_counts
