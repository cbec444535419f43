"""Token-budget batching with fixed length buckets.

Every example goes to the first bucket whose padded length fits its longer side; a
bucket's batches hold at most `max_tokens // padded_length` sentences (and at most
`max_sentences`), so `batch_size * padded_length <= max_tokens` on both sides, padding
included, like the paper's per-GPU word limit. Padded lengths come from a fixed list, so
a training step sees only a handful of shapes and is traced a handful of times.
"""

import math
from collections.abc import Sequence

import tensorflow as tf

# tf.data's functions are TensorFlow ops already: traced without AutoGraph's conversion
# (docs/input-pipeline-notes.md).
from tensorflow.autograph.experimental import do_not_convert

# (bucket width, up to this padded length): every other length up to 64, multiples of
# 8 up to 128, of 32 up to 256, ... Fine buckets at the lengths of most sentences keep
# padding (computed for nothing) to ~1 token per side, which is worth more training
# throughput than the extra shapes cost (docs/performance.md): the step's
# input_signature has `None` dims, so shapes cost no retracing.
_BUCKET_STEPS = ((2, 64), (8, 128), (32, 256), (64, 512), (128, 1024), (256, 2048))


def default_bucket_lengths(max_length: int) -> tuple[int, ...]:
    """Returns increasing padded lengths covering 1..`max_length` (its last is `max_length`)."""
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}.")
    lengths, length = [], 0
    for width, limit in _BUCKET_STEPS:
        while length + width <= limit and length + width < max_length:
            length += width
            lengths.append(length)
    width = _BUCKET_STEPS[-1][0]
    while length + width < max_length:
        length += width
        lengths.append(length)
    lengths.append(max_length)
    return tuple(lengths)


def fit_bucket_lengths(bucket_lengths: Sequence[int], max_tokens: int) -> tuple[int, ...]:
    """Returns `bucket_lengths` with `max_tokens` added as a bucket if it falls inside them.

    Then every sequence of up to `max_tokens` tokens lands in a bucket no longer than the
    budget, so a batch of one always fits; only longer sequences cannot be batched.
    """
    lengths = sorted(set(bucket_lengths))
    if max_tokens < lengths[-1] and max_tokens not in lengths:
        lengths.append(max_tokens)
    return tuple(sorted(lengths))


def bucket_batch_sizes(
    bucket_lengths: Sequence[int], max_tokens: int, max_sentences: int | None
) -> tuple[int, ...]:
    """Returns each bucket's batch size: `max_tokens // length`, capped at `max_sentences`.

    Buckets longer than `max_tokens` get 0: no batch of them fits the budget (the pipeline
    refuses data that would need them).
    """
    cap = max_sentences or math.inf
    return tuple(int(min(max_tokens // length, cap)) for length in bucket_lengths)


def assign_buckets(
    side_lengths: dict[str, tf.Tensor],
    side_max_lengths: dict[str, int],
    bucket_lengths: Sequence[int],
) -> tf.Tensor:
    """Returns the bucket of each example (vectorised), or `len(bucket_lengths)` ("reject")
    for examples with a side longer than its maximum.

    Args:
        side_lengths: sequence key -> int64 [N] lengths.
        side_max_lengths: sequence key -> maximum length of that side.
        bucket_lengths: increasing padded lengths; the last must hold every allowed side.
    """
    if max(side_max_lengths.values()) > bucket_lengths[-1]:
        raise ValueError("The last bucket must hold the longest allowed sequence.")
    lengths = tf.constant(bucket_lengths, tf.int64)
    longest = tf.reduce_max(tf.stack(list(side_lengths.values())), axis=0)
    too_long = tf.reduce_any(
        tf.stack([side_lengths[key] > cap for key, cap in side_max_lengths.items()]), axis=0
    )
    buckets = tf.searchsorted(lengths, longest, side="left", out_type=tf.int64)
    return tf.where(too_long, tf.constant(len(bucket_lengths), tf.int64), buckets)


def batch_by_bucket(
    dataset: tf.data.Dataset,
    *,
    bucket_key: str,
    bucket_lengths: Sequence[int],
    batch_sizes: Sequence[int],
    side_max_lengths: dict[str, int],
    padding_values: dict,
) -> tf.data.Dataset:
    """Groups examples into padded batches by their precomputed bucket.

    Args:
        dataset: dicts holding an int64 scalar `bucket_key` (from `assign_buckets`); keys
            in `side_max_lengths` are 1-D int32 sequences, other keys must be scalars.
        bucket_key: the key of the bucket id.
        bucket_lengths: increasing padded lengths.
        batch_sizes: batch size of each bucket.
        side_max_lengths: sequence key -> its maximum length; a side is padded to
            min(bucket length, its maximum) so it never exceeds its positions.
        padding_values: key -> padding value (sequences: `<pad>`).

    Returns:
        Batched dataset; examples of the "reject" bucket (`len(bucket_lengths)`) are
        dropped, every other example appears exactly once (partial batches are kept).
    """
    num_buckets = len(bucket_lengths)
    lengths = tf.constant(bucket_lengths, tf.int64)
    # Overlong examples go to an extra "reject" bucket whose batches are discarded: this
    # drops them within the grouping step instead of a per-example filter, which would
    # double the cost of an epoch.
    reject_bucket = num_buckets
    # Batch size 0 marks buckets beyond the budget, which callers keep empty.
    window_sizes = tf.constant([max(size, 1) for size in batch_sizes] + [1024], tf.int64)
    side_caps = {key: tf.constant(cap, tf.int64) for key, cap in side_max_lengths.items()}

    def batch_bucket(bucket: tf.Tensor, examples: tf.data.Dataset) -> tf.data.Dataset:
        is_reject = tf.equal(bucket, reject_bucket)
        length = lengths[tf.minimum(bucket, num_buckets - 1)]
        padded_shapes = {}
        for key in examples.element_spec:
            if key in side_caps:
                # -1 (pad to the longest) only for rejected examples, never emitted.
                padded = tf.where(
                    is_reject, tf.constant(-1, tf.int64), tf.minimum(length, side_caps[key])
                )
                padded_shapes[key] = padded[tf.newaxis]
            else:
                padded_shapes[key] = tf.TensorShape([])
        batches = examples.padded_batch(
            window_sizes[bucket],
            padded_shapes=padded_shapes,
            padding_values={key: padding_values[key] for key in examples.element_spec},
        )
        return batches.take(tf.where(is_reject, tf.constant(0, tf.int64), -1))

    return dataset.group_by_window(
        key_func=do_not_convert(lambda example: example[bucket_key]),
        reduce_func=do_not_convert(batch_bucket),
        window_size_func=do_not_convert(lambda bucket: window_sizes[bucket]),
    )
