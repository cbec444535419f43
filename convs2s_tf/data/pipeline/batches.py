"""What a pipeline yields: tokenised pairs batched per bucket, and the batches' figures."""

import dataclasses
from collections.abc import Callable

import tensorflow as tf

# tf.data's functions are TensorFlow ops already: traced without AutoGraph's conversion
# (docs/input-pipeline-notes.md).
from tensorflow.autograph.experimental import do_not_convert

from convs2s_tf import vocabulary
from convs2s_tf.data.batching import batch_by_bucket
from convs2s_tf.data.pipeline.length_stats import LengthStats
from convs2s_tf.data.pipeline.limits import PipelineLimits
from convs2s_tf.data.pipeline.tokenized_pairs import BUCKET, SOURCE_LENGTH, TARGET_LENGTH


@dataclasses.dataclass(frozen=True)
class BatchedDataset:
    """A pipeline and its figures.

    Attributes:
        dataset: the batches (see `convs2s_tf.data.pipeline`).
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


def batch_pairs(examples: tf.data.Dataset, limits: PipelineLimits) -> tf.data.Dataset:
    """Returns `examples` (tokenised pairs) batched per bucket under the token budget.

    Training pairs over the limits are dropped; each batch gets "target_input" and loses
    the bookkeeping fields (bucket, lengths).
    """
    padding_values = {
        "source": vocabulary.PAD_ID,
        "target": vocabulary.PAD_ID,
        "source_text": "",
        "reference_text": "",
        "index": tf.constant(-1, tf.int64),
        BUCKET: tf.constant(0, tf.int64),
        SOURCE_LENGTH: tf.constant(0, tf.int64),
        TARGET_LENGTH: tf.constant(0, tf.int64),
    }
    batches = batch_by_bucket(
        examples,
        bucket_key=BUCKET,
        bucket_lengths=limits.bucket_lengths,
        batch_sizes=limits.batch_sizes,
        side_max_lengths=limits.side_max_lengths,
        padding_values=padding_values,
    )
    return batches.map(do_not_convert(finish_batch), num_parallel_calls=tf.data.AUTOTUNE)


def finish_batch(batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
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
