"""Token-budget batches cut from whole blocks of pairs by vectorised ops.

The training stream reads its pairs in shuffled blocks (up to 100,000 pairs). Sending
each pair through tf.data on its own (unbatch, densify, group by bucket, pad: what
`batch_pairs` does) costs tens of microseconds a pair of a core the training step
needs: on 2 cores it took 8% off the step rate (docs/input-pipeline-notes.md). Here a
block is sorted by bucket and cut into batches by a few ops on the whole block, so
tf.data handles batches, not pairs.

Each bucket's last, incomplete batch waits for the next block (the `scan` state), and
the epoch's last block sends all of them, so an epoch has exactly the batches that
grouping pair by pair would make (per bucket, ceil(pairs / batch size)): the count the
lengths index predicts. A block's batches come in an order fixed by (seed, block), the
incomplete ones among the last block's.
"""

import tensorflow as tf

# tf.data's functions are TensorFlow ops already: traced without AutoGraph's conversion
# (docs/input-pipeline-notes.md).
from tensorflow.autograph.experimental import do_not_convert

from convs2s_tf import vocabulary
from convs2s_tf.data import records
from convs2s_tf.data.pipeline.batches import finish_batch
from convs2s_tf.data.pipeline.limits import PipelineLimits
from convs2s_tf.data.pipeline.tokenized_pairs import BUCKET

# A block's fields: the two sides (ragged int32 ids ending in `</s>`), the pairs' indices
# and their buckets (`assign_buckets`).
SIDES = (records.SOURCE, records.TARGET)
PAIR_FIELDS = (*SIDES, records.INDEX, BUCKET)


def batch_blocks(
    blocks: tf.data.Dataset, limits: PipelineLimits, num_blocks: int, seed: tf.Tensor
) -> tf.data.Dataset:
    """Returns the batches of an epoch's blocks, as `batch_pairs` would make them.

    Args:
        blocks: (block number, block): a block is a dict of `PAIR_FIELDS`, each [N, ...];
            pairs in the "reject" bucket (`len(limits.bucket_lengths)`) are dropped.
        limits: the pipeline's buckets and batch sizes.
        num_blocks: the epoch's blocks; the last sends every incomplete batch.
        seed: int64 scalar; the order of block `b`'s batches is a function of (seed, b).

    Returns:
        Dicts of "source", "target_input", "target" ([B, padded length] int32) and
        "index" ([B] int64).
    """
    cutter = _BlockCutter(limits)
    # `scan` keeps no ragged state: the waiting sides travel as (values, row lengths).
    empty = {records.INDEX: tf.zeros([0], tf.int64), BUCKET: tf.zeros([0], tf.int64)}
    for side in SIDES:
        empty[f"{side}_values"] = tf.zeros([0], tf.int32)
        empty[f"{side}_lengths"] = tf.zeros([0], tf.int64)

    def cut(
        waiting: dict[str, tf.Tensor], numbered_block: tuple[tf.Tensor, dict[str, tf.Tensor]]
    ) -> tuple[dict[str, tf.Tensor], tuple[tf.Tensor, dict[str, tf.Tensor]]]:
        number, block = numbered_block
        pairs = {key: block[key] for key in (records.INDEX, BUCKET)}
        for side in SIDES:
            rows = tf.RaggedTensor.from_row_lengths(
                waiting[f"{side}_values"], waiting[f"{side}_lengths"]
            )
            pairs[side] = tf.concat([rows, block[side]], axis=0)
        pairs = {
            key: tf.concat([waiting[key], value], axis=0) if key in waiting else value
            for key, value in pairs.items()
        }
        emitted, rest = cutter.cut(pairs, flush=tf.equal(number, num_blocks - 1))
        waiting = {key: rest[key] for key in (records.INDEX, BUCKET)}
        for side in SIDES:
            waiting[f"{side}_values"] = rest[side].flat_values
            waiting[f"{side}_lengths"] = rest[side].row_lengths()
        return waiting, (number, emitted)

    def block_batches(number: tf.Tensor, emitted: dict[str, tf.Tensor]) -> tf.data.Dataset:
        return cutter.batches(emitted, tf.stack([seed, number]))

    return blocks.scan(empty, do_not_convert(cut)).flat_map(do_not_convert(block_batches))


class _BlockCutter:
    """Cuts pairs into batches per bucket (`cut`) and makes the batches (`batches`)."""

    def __init__(self, limits: PipelineLimits) -> None:
        self.num_buckets = len(limits.bucket_lengths)
        # Buckets beyond the budget (batch size 0) stay empty: `batches_per_epoch`
        # refuses data that would need them.
        self.batch_sizes = tf.constant([max(size, 1) for size in limits.batch_sizes], tf.int64)
        lengths = tf.constant(limits.bucket_lengths, tf.int64)
        self.widths = {side: tf.minimum(lengths, limits.side_max_lengths[side]) for side in SIDES}

    def cut(self, pairs: dict, flush: tf.Tensor) -> tuple[dict, dict]:
        """Returns (emitted, waiting): the pairs of `pairs`' whole batches (all of them if
        `flush`) sorted by bucket, with the batches' starts, sizes and buckets; and the
        rest, to wait for the next block."""
        keep = pairs[BUCKET] < self.num_buckets
        pairs = {key: tf.gather(value, tf.where(keep)[:, 0]) for key, value in pairs.items()}
        order = tf.argsort(pairs[BUCKET], stable=True)
        pairs = {key: tf.gather(value, order) for key, value in pairs.items()}
        bucket = pairs[BUCKET]
        counts = tf.math.bincount(
            bucket, minlength=self.num_buckets, maxlength=self.num_buckets, dtype=tf.int64
        )
        batches = tf.where(
            flush, -(-counts // self.batch_sizes), counts // self.batch_sizes
        )  # per bucket
        emitted_counts = tf.minimum(batches * self.batch_sizes, counts)
        bucket_starts = tf.cumsum(counts, exclusive=True)
        rank = tf.range(tf.size(bucket, out_type=tf.int64)) - tf.gather(bucket_starts, bucket)
        emit = rank < tf.gather(emitted_counts, bucket)
        emitted = {key: tf.gather(value, tf.where(emit)[:, 0]) for key, value in pairs.items()}
        waiting = {key: tf.gather(value, tf.where(~emit)[:, 0]) for key, value in pairs.items()}
        # Batch j of bucket b: rows [start_b + j * size_b, ...) of the emitted pairs.
        batch_bucket = tf.repeat(tf.range(self.num_buckets, dtype=tf.int64), batches)
        first_batch = tf.repeat(tf.cumsum(batches, exclusive=True), batches)
        within = tf.range(tf.size(batch_bucket, out_type=tf.int64)) - first_batch
        size = tf.gather(self.batch_sizes, batch_bucket)
        emitted_starts = tf.cumsum(emitted_counts, exclusive=True)
        start = tf.gather(emitted_starts, batch_bucket) + within * size
        end = tf.gather(emitted_starts + emitted_counts, batch_bucket)
        emitted["batches"] = tf.stack([start, tf.minimum(start + size, end), batch_bucket], axis=1)
        return emitted, waiting

    def batches(self, emitted: dict, seed: tf.Tensor) -> tf.data.Dataset:
        """Returns the batches of `cut`'s emitted pairs, in an order fixed by `seed`."""
        spans = tf.random.experimental.stateless_shuffle(emitted["batches"], seed=seed)

        def batch(span: tf.Tensor) -> dict[str, tf.Tensor]:
            start, end, bucket = span[0], span[1], span[2]
            rows = {side: emitted[side][start:end] for side in SIDES}
            padded = {}
            for side, ids in rows.items():
                dense = ids.to_tensor(default_value=vocabulary.PAD_ID)
                missing = self.widths[side][bucket] - tf.shape(dense, out_type=tf.int64)[1]
                padded[side] = tf.pad(
                    dense, [[0, 0], [0, missing]], constant_values=vocabulary.PAD_ID
                )
            padded[records.INDEX] = emitted[records.INDEX][start:end]
            return finish_batch(padded)

        return tf.data.Dataset.from_tensor_slices(spans).map(do_not_convert(batch))
