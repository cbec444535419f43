"""Prepared pairs read from TFRecord shards: parsed, `</s>` appended, bucketed.

The counterpart of `tokenized_pairs` for prepared data: the same example dicts, with no
tokenising (done once by `pipelines.prepare_data`) and nothing to cache.
"""

import tensorflow as tf

# tf.data's functions are TensorFlow ops already: traced without AutoGraph's conversion
# (docs/input-pipeline-notes.md).
from tensorflow.autograph.experimental import do_not_convert

from convs2s_tf.data import records
from convs2s_tf.data.batching import assign_buckets
from convs2s_tf.data.pipeline.limits import PipelineLimits
from convs2s_tf.data.pipeline.tokenized_pairs import BUCKET, unbatch_blocks
from convs2s_tf.data.tokenizer import append_eos

_PARSE_BLOCK_RECORDS = 1024
# Shards read at once: enough to mix them and keep a core busy, few enough to bound the
# read buffers.
_CYCLE_LENGTH = 4


def record_stream(files: tf.data.Dataset) -> tf.data.Dataset:
    """Returns the serialised records of the shards named by `files` (tf.string), read a
    few at a time, in a deterministic order."""
    return files.interleave(
        tf.data.TFRecordDataset,
        cycle_length=_CYCLE_LENGTH,
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


def record_pairs(
    files: tf.data.Dataset, limits: PipelineLimits, *, evaluation: bool
) -> tf.data.Dataset:
    """Returns `parse_records` of the shards named by `files`, in a deterministic order."""
    return parse_records(record_stream(files), limits, evaluation=evaluation)


def parse_records(
    serialized: tf.data.Dataset, limits: PipelineLimits, *, evaluation: bool
) -> tf.data.Dataset:
    """Returns the pairs of serialised records.

    Args:
        serialized: tf.string records (`records` format).
        limits: the pipeline's length limits and buckets.
        evaluation: truncate overlong sides (keeping `</s>` last) and keep the text,
            instead of leaving overlong pairs to the batching's "reject" bucket.

    Returns:
        Dicts of "source", "target" (int32 ids ending in `</s>`), "source_length",
        "target_length" (before truncation), "bucket", "index" and, for evaluation,
        "source_text" and "reference_text".
    """
    blocks = serialized.batch(_PARSE_BLOCK_RECORDS).map(
        do_not_convert(lambda block: parse_block(block, limits, evaluation=evaluation)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return unbatch_blocks(blocks)


def parse_block(serialized: tf.Tensor, limits: PipelineLimits, *, evaluation: bool) -> dict:
    """Returns the pairs of a block of serialised records, as `parse_records` describes
    them (the sides ragged: [N, None])."""
    parsed = tf.io.parse_example(serialized, records.feature_spec(evaluation))
    example = {}
    for side in (records.SOURCE, records.TARGET):
        ids = tf.cast(parsed[side], tf.int32)
        example[f"{side}_length"] = ids.row_lengths() + 1  # with </s>
        if evaluation:
            ids = ids[:, : limits.side_max_lengths[side] - 1]
        example[side] = append_eos(ids)
    example[BUCKET] = assign_buckets(
        {side: example[side].row_lengths() for side in (records.SOURCE, records.TARGET)},
        limits.side_max_lengths,
        limits.bucket_lengths,
    )
    example[records.INDEX] = parsed[records.INDEX]
    if evaluation:
        example[records.SOURCE_TEXT] = parsed[records.SOURCE_TEXT]
        example[records.REFERENCE_TEXT] = parsed[records.REFERENCE_TEXT]
    return example
