"""tf.data input pipelines: prepared text -> token-budget batches for training and evaluation.

Both pipelines yield dicts of int32 tensors padded with `<pad>` (id 1):

- "source": [B, S], the source pieces followed by `</s>`;
- "target": [B, T], the target pieces y1..yn followed by `</s>`;
- "target_input": [B, T], the decoder input `</s>`, y1..yn, i.e. "target" shifted right
  by one with `</s>` in front (and `<pad>` wherever "target" is `<pad>`).

The evaluation pipeline adds "source_text" and "reference_text" (tf.string [B], the
prepared text, for BLEU) and "index" (int64 [B], the line number in the split, 0-based).

Steps: read the two text files line by line (sharded per worker) -> tokenise in-graph in
blocks of lines (one SentencePiece tokenizer, `</s>` added with tf.concat), assigning
each pair its length bucket -> cache (memory or disk, so later epochs skip all of this)
-> [training: seeded shuffle] -> batch per bucket under the token budget, dropping
(training) the pairs longer than the model's positions -> prefetch. Evaluation pairs
that are too long are truncated instead, so every reference is kept.

Building a pipeline runs one pass over the tokenised data to count what the length limit
removes and how many batches an epoch has; that pass fills the cache, so the first epoch
does not tokenise again.
"""

import dataclasses
import hashlib
import math
import os
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from convs2s_tf import vocabulary
from convs2s_tf.data.batching import (
    assign_buckets,
    batch_by_bucket,
    bucket_batch_sizes,
    default_bucket_lengths,
    fit_bucket_lengths,
)
from convs2s_tf.data.tokenizer import Tokenizer, append_eos

DEFAULT_MAX_POSITIONS = 1024
_TOKENIZE_BLOCK_LINES = 1024
_COUNT_BLOCK = 4096
# Cached per pair besides the ids; dropped once batched.
_BUCKET = "bucket"
_SOURCE_LENGTH = "source_length"
_TARGET_LENGTH = "target_length"


def max_sequence_length(max_positions: int) -> int:
    """Returns the longest sequence (with `</s>`) a model with `max_positions` positions takes.

    Positions start after the padding id (as in the authors' implementation), so
    `max_positions - PAD_ID - 1` (1022 for 1024) tokens fit.
    """
    length = max_positions - vocabulary.PAD_ID - 1
    if length < 1:
        raise ValueError(f"max_positions={max_positions} leaves no room for a sequence.")
    return length


@dataclasses.dataclass(frozen=True)
class LengthStats:
    """What the length limit did to one split (this worker's shard of it).

    Attributes:
        pairs: pairs read.
        pairs_kept: pairs in the batches (training: pairs - pairs_too_long; evaluation:
            all of them).
        pairs_too_long: pairs with a side over its limit: dropped in training, truncated
            (to the limit, ending in `</s>`) in evaluation.
        source_too_long: pairs whose source (with `</s>`) exceeds the source limit.
        target_too_long: pairs whose target (with `</s>`) exceeds the target limit.
        source_tokens: non-padding source tokens per epoch (with `</s>`).
        target_tokens: non-padding target tokens per epoch (with `</s>`).
        batches_per_epoch: batches in one pass (exact: buckets fill independently).
    """

    pairs: int
    pairs_kept: int
    pairs_too_long: int
    source_too_long: int
    target_too_long: int
    source_tokens: int
    target_tokens: int
    batches_per_epoch: int

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class BatchedDataset:
    """A pipeline and its figures.

    Attributes:
        dataset: the batches (see the module docstring).
        stats: length-limit counts and epoch size.
        bucket_lengths: padded lengths of the buckets (the possible values of S and T,
            each side also capped at its own maximum length).
        batch_sizes: sentences per full batch of each bucket.
    """

    dataset: tf.data.Dataset
    stats: LengthStats
    bucket_lengths: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    epoch_fn: Callable[[int], tf.data.Dataset] | None = dataclasses.field(default=None, repr=False)

    def epoch(self, epoch: int) -> tf.data.Dataset:
        """Returns the batches of epoch `epoch` (0-based), sharing this pipeline's cache.

        For training, the order is fixed by (seed, epoch) alone, so a resumed run sees
        the same batches as an uninterrupted one; evaluation batches are the same every
        epoch.
        """
        return self.epoch_fn(epoch) if self.epoch_fn is not None else self.dataset


@dataclasses.dataclass(frozen=True)
class _Limits:
    """Length limits and bucket layout shared by the steps of one pipeline."""

    max_source_length: int
    max_target_length: int
    max_tokens: int
    bucket_lengths: tuple[int, ...]
    batch_sizes: tuple[int, ...]

    @classmethod
    def create(
        cls,
        max_source_positions: int,
        max_target_positions: int,
        max_tokens: int,
        max_sentences: int | None,
        bucket_lengths: Sequence[int] | None,
    ) -> "_Limits":
        max_source_length = max_sequence_length(max_source_positions)
        max_target_length = max_sequence_length(max_target_positions)
        longest = max(max_source_length, max_target_length)
        if bucket_lengths is None:
            bucket_lengths = fit_bucket_lengths(default_bucket_lengths(longest), max_tokens)
        bucket_lengths = tuple(sorted(int(length) for length in bucket_lengths))
        if bucket_lengths[-1] < longest:
            raise ValueError(
                f"The longest bucket ({bucket_lengths[-1]}) must hold the longest allowed "
                f"sequence ({longest})."
            )
        batch_sizes = bucket_batch_sizes(bucket_lengths, max_tokens, max_sentences)
        return cls(max_source_length, max_target_length, max_tokens, bucket_lengths, batch_sizes)

    @property
    def side_max_lengths(self) -> dict[str, int]:
        return {"source": self.max_source_length, "target": self.max_target_length}


def _shard_spec(
    input_context: tf.distribute.InputContext | None, num_shards: int, shard_index: int
) -> tuple[int, int]:
    if input_context is not None:
        return input_context.num_input_pipelines, input_context.input_pipeline_id
    if not 0 <= shard_index < num_shards:
        raise ValueError(f"shard_index={shard_index} is not in [0, num_shards={num_shards}).")
    return num_shards, shard_index


def _cache_file(
    cache_dir: str | None,
    kind: str,
    tokenizer: Tokenizer,
    paths: Sequence[str],
    shard: tuple[int, int],
    limits: _Limits,
) -> str:
    """Returns "" (memory) or a cache file named after everything its content depends on."""
    if not cache_dir:
        return ""
    digest = hashlib.sha256(tokenizer.model_proto)
    for path in paths:
        status = os.stat(path)
        digest.update(f"{os.path.abspath(path)}:{status.st_size}:{status.st_mtime_ns}".encode())
    digest.update(f"{kind}:{shard}:{limits}".encode())
    tf.io.gfile.makedirs(cache_dir)
    return os.path.join(cache_dir, f"{kind}-shard{shard[1]}of{shard[0]}-{digest.hexdigest()[:16]}")


def _tokenized_pairs(
    source_path: str,
    target_path: str,
    tokenizer: Tokenizer,
    shard: tuple[int, int],
    limits: _Limits,
    evaluation: bool,
) -> tf.data.Dataset:
    """Returns a shard's pairs, tokenised, with their bucket (and text, for evaluation).

    All per-pair work is vectorised over blocks of lines; the result is meant to be cached.
    """
    lines = tf.data.Dataset.zip(
        tf.data.TextLineDataset(source_path), tf.data.TextLineDataset(target_path)
    )
    lines = tf.data.Dataset.zip(tf.data.Dataset.range(tf.int64.max), lines)
    num_shards, shard_index = shard
    if num_shards > 1:
        lines = lines.shard(num_shards, shard_index)

    def tokenize_block(index, texts):
        source_texts, target_texts = texts
        count = tf.shape(source_texts)[0]
        # One call of the one tokenizer for both sides (see the tokenizer module).
        pieces = tokenizer.encode(tf.concat([source_texts, target_texts], axis=0))
        sides = {"source": pieces[:count], "target": pieces[count:]}
        example = {}
        for side, side_pieces in sides.items():
            example[f"{side}_length"] = side_pieces.row_lengths() + 1  # with </s>
            if evaluation:
                # Truncate so that </s> still ends the sequence.
                side_pieces = side_pieces[:, : limits.side_max_lengths[side] - 1]
            example[side] = append_eos(side_pieces)
        example[_BUCKET] = assign_buckets(
            {side: example[side].row_lengths() for side in sides},
            limits.side_max_lengths,
            limits.bucket_lengths,
        )
        if evaluation:
            example.update(source_text=source_texts, reference_text=target_texts, index=index)
        return example

    def to_dense(example):
        # Unbatched rows of a ragged block are ragged_rank-0 values: make them plain tensors.
        return {
            key: value.to_tensor() if isinstance(value, tf.RaggedTensor) else value
            for key, value in example.items()
        }

    return (
        lines.batch(_TOKENIZE_BLOCK_LINES)
        .map(tokenize_block, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .unbatch()
        .map(to_dense, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    )


def _count(tokenized: tf.data.Dataset, limits: _Limits, evaluation: bool) -> LengthStats:
    """One pass over `tokenized` (filling its cache) counting the length limits' effect."""
    num_buckets = len(limits.bucket_lengths)

    def add_block(totals, block):
        source_lengths, target_lengths, buckets = block
        source_over = source_lengths > limits.max_source_length
        target_over = target_lengths > limits.max_target_length
        too_long = source_over | target_over
        kept = tf.ones_like(too_long) if evaluation else tf.logical_not(too_long)
        source_lengths = tf.minimum(source_lengths, limits.max_source_length)
        target_lengths = tf.minimum(target_lengths, limits.max_target_length)

        def total(values):
            return tf.reduce_sum(tf.cast(values, tf.int64))

        return {
            "pairs": totals["pairs"] + tf.size(source_lengths, out_type=tf.int64),
            "pairs_kept": totals["pairs_kept"] + total(kept),
            "pairs_too_long": totals["pairs_too_long"] + total(too_long),
            "source_too_long": totals["source_too_long"] + total(source_over),
            "target_too_long": totals["target_too_long"] + total(target_over),
            "source_tokens": totals["source_tokens"] + total(tf.boolean_mask(source_lengths, kept)),
            "target_tokens": totals["target_tokens"] + total(tf.boolean_mask(target_lengths, kept)),
            # One more bin: the "reject" bucket of overlong training pairs.
            "bucket_counts": totals["bucket_counts"]
            + tf.math.bincount(
                tf.cast(buckets, tf.int32), minlength=num_buckets + 1, dtype=tf.int64
            ),
        }

    initial = {name: tf.constant(0, tf.int64) for name in LengthStats.__annotations__}
    del initial["batches_per_epoch"]
    initial["bucket_counts"] = tf.zeros([num_buckets + 1], tf.int64)
    totals = (
        tokenized.map(
            lambda example: (example[_SOURCE_LENGTH], example[_TARGET_LENGTH], example[_BUCKET]),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        .batch(_COUNT_BLOCK)
        .reduce(initial, add_block)
    )
    bucket_counts = totals.pop("bucket_counts").numpy()[:num_buckets]
    over_budget = sum(
        int(count) for count, size in zip(bucket_counts, limits.batch_sizes) if size == 0
    )
    if over_budget:
        raise ValueError(
            f"{over_budget} pairs are longer than the token budget max_tokens={limits.max_tokens} "
            "allows for one sentence with its padding; raise --max_tokens or lower "
            "--max_source_positions/--max_target_positions."
        )
    batches = sum(
        math.ceil(count / size) for count, size in zip(bucket_counts, limits.batch_sizes) if count
    )
    return LengthStats(
        **{name: int(value.numpy()) for name, value in totals.items()}, batches_per_epoch=batches
    )


def _finish_batch(batch):
    """Adds "target_input" ("target" shifted right, `</s>` first, `<pad>` kept) and drops
    the bookkeeping fields."""
    target = batch["target"]
    eos_column = tf.fill([tf.shape(target)[0], 1], tf.constant(vocabulary.EOS_ID, tf.int32))
    shifted = tf.concat([eos_column, target[:, :-1]], axis=1)
    target_input = tf.where(tf.equal(target, vocabulary.PAD_ID), vocabulary.PAD_ID, shifted)
    finished = {"source": batch["source"], "target_input": target_input, "target": target}
    for key in ("source_text", "reference_text", "index"):
        if key in batch:
            finished[key] = batch[key]
    return finished


def _batched(examples: tf.data.Dataset, limits: _Limits) -> tf.data.Dataset:
    padding_values = {
        "source": vocabulary.PAD_ID,
        "target": vocabulary.PAD_ID,
        "source_text": "",
        "reference_text": "",
        "index": tf.constant(-1, tf.int64),
        _BUCKET: tf.constant(0, tf.int64),
        _SOURCE_LENGTH: tf.constant(0, tf.int64),
        _TARGET_LENGTH: tf.constant(0, tf.int64),
    }
    batches = batch_by_bucket(
        examples,
        bucket_key=_BUCKET,
        bucket_lengths=limits.bucket_lengths,
        batch_sizes=limits.batch_sizes,
        side_max_lengths=limits.side_max_lengths,
        padding_values=padding_values,
    )
    return batches.map(_finish_batch, num_parallel_calls=tf.data.AUTOTUNE)


def make_training_dataset(
    source_path: str,
    target_path: str,
    tokenizer: Tokenizer,
    *,
    max_tokens: int = 4000,
    max_sentences: int | None = None,
    max_source_positions: int = DEFAULT_MAX_POSITIONS,
    max_target_positions: int = DEFAULT_MAX_POSITIONS,
    seed: int = 1,
    shuffle_buffer_size: int | None = None,
    batch_shuffle_buffer_size: int = 64,
    bucket_lengths: Sequence[int] | None = None,
    cache_dir: str | None = None,
    num_shards: int = 1,
    shard_index: int = 0,
    input_context: tf.distribute.InputContext | None = None,
) -> BatchedDataset:
    """Returns one epoch of shuffled token-budget training batches (repeat it yourself).

    Each epoch holds every pair that fits the positions exactly once, in a new seeded
    order (the same sequence of orders for the same seed).

    Args:
        source_path: prepared source text, one sentence per line (`PreparedData.split_paths`).
        target_path: prepared target text, aligned with `source_path`.
        tokenizer: the `Tokenizer` of the data directory's SentencePiece model.
        max_tokens: token budget per batch (per replica), padding included:
            batch size * padded length <= max_tokens for source and target alike.
        max_sentences: at most this many sentences per batch (None or 0: no cap).
        max_source_positions: the model's source positions; pairs whose source with
            `</s>` is longer than `max_source_positions - 2` are dropped and counted.
        max_target_positions: the same for the target.
        seed: shuffling seed.
        shuffle_buffer_size: pairs in the shuffle buffer (default: the whole shard, up to
            2,000,000).
        batch_shuffle_buffer_size: batches shuffled after bucketing, so that the last,
            partial batches of each bucket do not all come at the end of an epoch.
        bucket_lengths: padded lengths of the buckets (default: `default_bucket_lengths`).
        cache_dir: directory for the tokenised cache (default: in memory).
        num_shards: number of input pipelines (workers); each keeps every
            `num_shards`-th pair starting at `shard_index`.
        shard_index: this pipeline's shard.
        input_context: from `tf.distribute.Strategy.distribute_datasets_from_function`;
            overrides `num_shards` and `shard_index`.

    Returns:
        The batches with their `LengthStats` and bucket layout.
    """
    shard = _shard_spec(input_context, num_shards, shard_index)
    limits = _Limits.create(
        max_source_positions, max_target_positions, max_tokens, max_sentences, bucket_lengths
    )
    paths = (source_path, target_path)
    tokenized = _tokenized_pairs(*paths, tokenizer, shard, limits, evaluation=False).cache(
        _cache_file(cache_dir, "train", tokenizer, paths, shard, limits)
    )
    stats = _count(tokenized, limits, evaluation=False)
    buffer_size = shuffle_buffer_size or max(1, min(stats.pairs, 2_000_000))

    def shuffled_batches(example_seed: int, batch_seed: int, reshuffle: bool) -> tf.data.Dataset:
        examples = tokenized.shuffle(
            buffer_size, seed=example_seed, reshuffle_each_iteration=reshuffle
        )
        batches = _batched(examples, limits)
        if batch_shuffle_buffer_size > 1:
            batches = batches.shuffle(
                batch_shuffle_buffer_size, seed=batch_seed, reshuffle_each_iteration=reshuffle
            )
        return batches.prefetch(tf.data.AUTOTUNE)

    def epoch_batches(epoch: int) -> tf.data.Dataset:
        example_seed, batch_seed = (
            int(value) for value in np.random.SeedSequence([seed, epoch]).generate_state(2)
        )
        return shuffled_batches(example_seed, batch_seed, reshuffle=False)

    return BatchedDataset(
        dataset=shuffled_batches(seed, seed + 1, reshuffle=True),
        stats=stats,
        bucket_lengths=limits.bucket_lengths,
        batch_sizes=limits.batch_sizes,
        epoch_fn=epoch_batches,
    )


class TrainingDatasetFn:
    """`(epoch, input_context) -> tf.data.Dataset` of one epoch, for a trainer that asks
    for every epoch's dataset (e.g. through `distribute_datasets_from_function`).

    Each input pipeline (shard) is built once, on first use, so its tokenised cache is
    shared by all epochs; epoch `e` comes from `BatchedDataset.epoch(e)`, an order fixed
    by (seed, e).

    Example:
        train_fn = TrainingDatasetFn(*prepared.split_paths("train"), tokenizer,
                                     max_tokens=4000)
        steps = train_fn.batched().stats.batches_per_epoch
        dataset = train_fn(epoch, input_context)
    """

    def __init__(self, source_path: str, target_path: str, tokenizer: Tokenizer, **kwargs):
        """Takes the arguments of `make_training_dataset` (except the sharding ones)."""
        for name in ("num_shards", "shard_index", "input_context"):
            if name in kwargs:
                raise ValueError(f"{name} comes from the input context of each call.")
        self._arguments = (source_path, target_path, tokenizer)
        self._kwargs = kwargs
        self._pipelines: dict[tuple[int, int], BatchedDataset] = {}

    def batched(self, input_context: tf.distribute.InputContext | None = None) -> BatchedDataset:
        """Returns (building it the first time) the pipeline of `input_context`'s shard."""
        shard = _shard_spec(input_context, 1, 0)
        if shard not in self._pipelines:
            self._pipelines[shard] = make_training_dataset(
                *self._arguments, num_shards=shard[0], shard_index=shard[1], **self._kwargs
            )
        return self._pipelines[shard]

    def __call__(
        self, epoch: int, input_context: tf.distribute.InputContext | None = None
    ) -> tf.data.Dataset:
        return self.batched(input_context).epoch(epoch)


def make_eval_dataset(
    source_path: str,
    target_path: str,
    tokenizer: Tokenizer,
    *,
    max_tokens: int = 4000,
    max_sentences: int | None = None,
    max_source_positions: int = DEFAULT_MAX_POSITIONS,
    max_target_positions: int = DEFAULT_MAX_POSITIONS,
    bucket_lengths: Sequence[int] | None = None,
    cache_dir: str | None = None,
    num_shards: int = 1,
    shard_index: int = 0,
    input_context: tf.distribute.InputContext | None = None,
) -> BatchedDataset:
    """Returns evaluation batches: every pair once, in a deterministic order, with text.

    Nothing is dropped: a side longer than its positions allow is truncated (keeping
    `</s>` last) and counted in `stats.pairs_too_long`; partial batches are kept. Batches
    are bucketed by length like training batches, so they do not follow the corpus
    order: "index" gives each pair's line, and "source_text" and "reference_text" travel
    with the ids, so hypotheses and references stay aligned for BLEU.

    Args:
        source_path, target_path, tokenizer, max_tokens, max_sentences,
        max_source_positions, max_target_positions, bucket_lengths, cache_dir,
        num_shards, shard_index, input_context: as for `make_training_dataset`.

    Returns:
        The batches with their `LengthStats` and bucket layout.
    """
    shard = _shard_spec(input_context, num_shards, shard_index)
    limits = _Limits.create(
        max_source_positions, max_target_positions, max_tokens, max_sentences, bucket_lengths
    )
    paths = (source_path, target_path)
    tokenized = _tokenized_pairs(*paths, tokenizer, shard, limits, evaluation=True).cache(
        _cache_file(cache_dir, "eval", tokenizer, paths, shard, limits)
    )
    stats = _count(tokenized, limits, evaluation=True)
    return BatchedDataset(
        dataset=_batched(tokenized, limits).prefetch(tf.data.AUTOTUNE),
        stats=stats,
        bucket_lengths=limits.bucket_lengths,
        batch_sizes=limits.batch_sizes,
    )
