"""The training pipeline: every pair that fits, once per epoch, in a seeded order."""

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from convs2s_tf.data.pipeline.batches import BatchedDataset, batch_pairs
from convs2s_tf.data.pipeline.length_stats import count_length_stats
from convs2s_tf.data.pipeline.limits import DEFAULT_MAX_POSITIONS, PipelineLimits
from convs2s_tf.data.pipeline.tokenized_pairs import cached_tokenized_pairs, shard_spec
from convs2s_tf.data.tokenizer import Tokenizer

# The default shuffle buffer holds the whole shard, up to this many pairs.
_MAX_SHUFFLE_BUFFER_SIZE = 2_000_000


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
    shard = shard_spec(input_context, num_shards, shard_index)
    limits = PipelineLimits.create(
        max_source_positions, max_target_positions, max_tokens, max_sentences, bucket_lengths
    )
    tokenized = cached_tokenized_pairs(
        source_path, target_path, tokenizer, shard, limits, evaluation=False, cache_dir=cache_dir
    )
    stats = count_length_stats(tokenized, limits, evaluation=False)
    buffer_size = shuffle_buffer_size or max(1, min(stats.pairs, _MAX_SHUFFLE_BUFFER_SIZE))
    shuffled = functools.partial(
        _shuffled_batches, tokenized, limits, buffer_size, batch_shuffle_buffer_size
    )
    return BatchedDataset(
        dataset=shuffled(seed, seed + 1, reshuffle=True),
        stats=stats,
        bucket_lengths=limits.bucket_lengths,
        batch_sizes=limits.batch_sizes,
        epoch_fn=lambda epoch: shuffled(*_epoch_seeds(seed, epoch), reshuffle=False),
    )


def _shuffled_batches(
    tokenized: tf.data.Dataset,
    limits: PipelineLimits,
    buffer_size: int,
    batch_shuffle_buffer_size: int,
    example_seed: int,
    batch_seed: int,
    reshuffle: bool,
) -> tf.data.Dataset:
    """Returns the batches of `tokenized` shuffled before and after bucketing, prefetched."""
    examples = tokenized.shuffle(buffer_size, seed=example_seed, reshuffle_each_iteration=reshuffle)
    batches = batch_pairs(examples, limits)
    if batch_shuffle_buffer_size > 1:
        batches = batches.shuffle(
            batch_shuffle_buffer_size, seed=batch_seed, reshuffle_each_iteration=reshuffle
        )
    return batches.prefetch(tf.data.AUTOTUNE)


def _epoch_seeds(seed: int, epoch: int) -> tuple[int, int]:
    """Returns the (pair, batch) shuffling seeds of `epoch`: a function of (seed, epoch)
    alone, so that a resumed run sees the same orders as an uninterrupted one."""
    example_seed, batch_seed = (
        int(value) for value in np.random.SeedSequence([seed, epoch]).generate_state(2)
    )
    return example_seed, batch_seed


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

    def __init__(
        self, source_path: str, target_path: str, tokenizer: Tokenizer, **kwargs: Any
    ) -> None:
        """Takes the arguments of `make_training_dataset` (except the sharding ones)."""
        for name in ("num_shards", "shard_index", "input_context"):
            if name in kwargs:
                raise ValueError(f"{name} comes from the input context of each call.")
        self._arguments = (source_path, target_path, tokenizer)
        self._kwargs = kwargs
        self._pipelines: dict[tuple[int, int], BatchedDataset] = {}

    def batched(self, input_context: tf.distribute.InputContext | None = None) -> BatchedDataset:
        """Returns (building it the first time) the pipeline of `input_context`'s shard."""
        shard = shard_spec(input_context, 1, 0)
        if shard not in self._pipelines:
            self._pipelines[shard] = make_training_dataset(
                *self._arguments, num_shards=shard[0], shard_index=shard[1], **self._kwargs
            )
        return self._pipelines[shard]

    def __call__(
        self, epoch: int, input_context: tf.distribute.InputContext | None = None
    ) -> tf.data.Dataset:
        return self.batched(input_context).epoch(epoch)
