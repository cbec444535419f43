"""What the length limits do to a split, counted in one pass over its tokenised pairs."""

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

# tf.data's functions are TensorFlow ops already: traced without AutoGraph's conversion
# (docs/input-pipeline-notes.md).
from tensorflow.autograph.experimental import do_not_convert

from convs2s_tf.data.length_index import LengthIndex
from convs2s_tf.data.pipeline.limits import PipelineLimits
from convs2s_tf.data.pipeline.tokenized_pairs import BUCKET, SOURCE_LENGTH, TARGET_LENGTH

_COUNT_BLOCK = 4096


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


def batches_per_epoch(bucket_counts: Sequence[int] | np.ndarray, limits: PipelineLimits) -> int:
    """Returns the batches the pairs of each bucket make (buckets fill independently).

    Raises:
        ValueError: if some pairs fall in buckets too long for one sentence of the budget.
    """
    over_budget = sum(
        int(count) for count, size in zip(bucket_counts, limits.batch_sizes) if size == 0
    )
    if over_budget:
        raise ValueError(
            f"{over_budget} pairs are longer than the token budget "
            f"`max_tokens={limits.max_tokens}` allows for one sentence with its padding; "
            "raise `max_tokens` or lower `max_source_positions`/`max_target_positions`."
        )
    return sum(
        math.ceil(count / size) for count, size in zip(bucket_counts, limits.batch_sizes) if count
    )


def count_length_stats(
    tokenized: tf.data.Dataset, limits: PipelineLimits, evaluation: bool
) -> LengthStats:
    """One pass over `tokenized` (filling its cache) counting the length limits' effect.

    Raises:
        ValueError: if some pairs fall in buckets too long for one sentence of the budget.
    """
    num_buckets = len(limits.bucket_lengths)

    def add_block(
        totals: dict[str, tf.Tensor], block: tuple[tf.Tensor, tf.Tensor, tf.Tensor]
    ) -> dict[str, tf.Tensor]:
        source_lengths, target_lengths, buckets = block
        source_over = source_lengths > limits.max_source_length
        target_over = target_lengths > limits.max_target_length
        too_long = source_over | target_over
        kept = tf.ones_like(too_long) if evaluation else tf.logical_not(too_long)
        source_lengths = tf.minimum(source_lengths, limits.max_source_length)
        target_lengths = tf.minimum(target_lengths, limits.max_target_length)

        def total(values: tf.Tensor) -> tf.Tensor:
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
            do_not_convert(
                lambda example: (example[SOURCE_LENGTH], example[TARGET_LENGTH], example[BUCKET])
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        .batch(_COUNT_BLOCK)
        .reduce(initial, do_not_convert(add_block))
    )
    bucket_counts = totals.pop("bucket_counts").numpy()[:num_buckets]
    batches = batches_per_epoch(bucket_counts, limits)
    return LengthStats(
        **{name: int(value.numpy()) for name, value in totals.items()}, batches_per_epoch=batches
    )


def index_length_stats(
    index: LengthIndex, shards: Sequence[int], limits: PipelineLimits, evaluation: bool
) -> LengthStats:
    """`count_length_stats` of the pairs of `shards`, from the lengths index alone.

    Raises:
        ValueError: as `count_length_stats`.
    """
    rows = index.rows_of(shards)
    source_lengths = index.source_length[rows].astype(np.int64)
    target_lengths = index.target_length[rows].astype(np.int64)
    counts = index.count[rows]
    source_over = source_lengths > limits.max_source_length
    target_over = target_lengths > limits.max_target_length
    too_long = source_over | target_over
    kept = np.ones_like(too_long) if evaluation else ~too_long
    source_lengths = np.minimum(source_lengths, limits.max_source_length)
    target_lengths = np.minimum(target_lengths, limits.max_target_length)
    # The bucket of each row, as `batching.assign_buckets` assigns it in the pipeline.
    buckets = np.searchsorted(
        np.asarray(limits.bucket_lengths), np.maximum(source_lengths, target_lengths), "left"
    )
    bucket_counts = np.bincount(
        buckets[kept], weights=counts[kept], minlength=len(limits.bucket_lengths)
    ).astype(np.int64)
    batches = batches_per_epoch(bucket_counts, limits)

    def total(values: np.ndarray) -> int:
        return int((values * counts).sum())

    return LengthStats(
        pairs=total(np.ones_like(too_long)),
        pairs_kept=total(kept),
        pairs_too_long=total(too_long),
        source_too_long=total(source_over),
        target_too_long=total(target_over),
        source_tokens=total(np.where(kept, source_lengths, 0)),
        target_tokens=total(np.where(kept, target_lengths, 0)),
        batches_per_epoch=batches,
    )
