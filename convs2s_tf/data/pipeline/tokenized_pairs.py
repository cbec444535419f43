"""The tokenised corpus: a shard's pairs read, tokenised in-graph, bucketed and cached.

This is the per-pair work of both pipelines, done once: the cache (in memory or in a
file named after everything its content depends on) lets later epochs skip it.
"""

import hashlib
import os
from collections.abc import Sequence

import tensorflow as tf

# tf.data's functions are TensorFlow ops already: traced without AutoGraph's conversion
# (docs/input-pipeline-notes.md).
from tensorflow.autograph.experimental import do_not_convert

from convs2s_tf.data.batching import assign_buckets
from convs2s_tf.data.pipeline.limits import PipelineLimits
from convs2s_tf.data.tokenizer import Tokenizer, append_eos

# Cached per pair besides the ids; dropped once batched.
BUCKET = "bucket"
SOURCE_LENGTH = "source_length"
TARGET_LENGTH = "target_length"

_TOKENIZE_BLOCK_LINES = 1024


def shard_spec(
    input_context: tf.distribute.InputContext | None, num_shards: int, shard_index: int
) -> tuple[int, int]:
    """Returns (number of shards, this shard's index), from `input_context` if given.

    Raises:
        ValueError: if `shard_index` is not a shard of `num_shards`.
    """
    if input_context is not None:
        return input_context.num_input_pipelines, input_context.input_pipeline_id
    if not 0 <= shard_index < num_shards:
        raise ValueError(f"shard_index={shard_index} is not in [0, num_shards={num_shards}).")
    return num_shards, shard_index


def cached_tokenized_pairs(
    source_path: str,
    target_path: str,
    tokenizer: Tokenizer,
    shard: tuple[int, int],
    limits: PipelineLimits,
    *,
    evaluation: bool,
    cache_dir: str | None,
) -> tf.data.Dataset:
    """Returns `tokenized_pairs`, cached (so the work is done once, not every epoch).

    Args:
        source_path: prepared source text, one sentence per line.
        target_path: prepared target text, aligned with `source_path`.
        tokenizer: the data directory's tokenizer.
        shard: (number of shards, this shard's index), from `shard_spec`.
        limits: the pipeline's length limits and buckets.
        evaluation: whether the pairs are for evaluation (truncated to the limits, with
            their text and line index) rather than training (as they are).
        cache_dir: directory of the cache file (None or "": in memory).
    """
    paths = (source_path, target_path)
    kind = "eval" if evaluation else "train"
    tokenized = tokenized_pairs(*paths, tokenizer, shard, limits, evaluation=evaluation)
    return tokenized.cache(_cache_file(cache_dir, kind, tokenizer, paths, shard, limits))


def _cache_file(
    cache_dir: str | None,
    kind: str,
    tokenizer: Tokenizer,
    paths: Sequence[str],
    shard: tuple[int, int],
    limits: PipelineLimits,
) -> str:
    """Returns "" (memory) or a cache file named after everything its content depends on."""
    if not cache_dir:
        return ""
    digest = hashlib.sha256(tokenizer.model_proto)
    for path in paths:
        status = os.stat(path)
        digest.update(f"{os.path.abspath(path)}:{status.st_size}:{status.st_mtime_ns}".encode())
    digest.update(f"{kind}:{shard}:{limits.cache_key()}".encode())
    tf.io.gfile.makedirs(cache_dir)
    return os.path.join(cache_dir, f"{kind}-shard{shard[1]}of{shard[0]}-{digest.hexdigest()[:16]}")


def tokenized_pairs(
    source_path: str,
    target_path: str,
    tokenizer: Tokenizer,
    shard: tuple[int, int],
    limits: PipelineLimits,
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

    def tokenize_block(
        index: tf.Tensor, texts: tuple[tf.Tensor, tf.Tensor]
    ) -> dict[str, tf.Tensor]:
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
        example[BUCKET] = assign_buckets(
            {side: example[side].row_lengths() for side in sides},
            limits.side_max_lengths,
            limits.bucket_lengths,
        )
        if evaluation:
            example.update(source_text=source_texts, reference_text=target_texts, index=index)
        return example

    blocks = lines.batch(_TOKENIZE_BLOCK_LINES).map(
        do_not_convert(tokenize_block), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    return unbatch_blocks(blocks)


def unbatch_blocks(blocks: tf.data.Dataset) -> tf.data.Dataset:
    """Returns the rows of blocks of examples, each side a plain (dense) tensor."""

    def to_dense(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        # Unbatched rows of a ragged block are ragged_rank-0 values: make them plain tensors.
        return {
            key: value.to_tensor() if isinstance(value, tf.RaggedTensor) else value
            for key, value in example.items()
        }

    return blocks.unbatch().map(
        do_not_convert(to_dense), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
