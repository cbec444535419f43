"""The evaluation pipeline: every pair once, deterministic, with its text and line index.

`make_shard_eval_dataset` reads a prepared split's shards (what training validates on);
`make_eval_dataset` tokenises any pair of text files itself.
"""

from collections.abc import Sequence

import tensorflow as tf

from convs2s_tf.data.length_index import LengthIndex
from convs2s_tf.data.pipeline.batches import BatchedDataset, batch_pairs
from convs2s_tf.data.pipeline.length_stats import count_length_stats, index_length_stats
from convs2s_tf.data.pipeline.limits import DEFAULT_MAX_POSITIONS, PipelineLimits
from convs2s_tf.data.pipeline.record_pairs import record_pairs
from convs2s_tf.data.pipeline.tokenized_pairs import cached_tokenized_pairs, shard_spec
from convs2s_tf.data.shard_check import check_shards
from convs2s_tf.data.tokenizer import Tokenizer


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
        source_path: source text, one sentence per line.
        target_path: reference text, aligned with `source_path`.
        tokenizer: the `Tokenizer` of the data directory's SentencePiece model.
        max_tokens: token budget per batch, padding included.
        max_sentences: at most this many sentences per batch (None or 0: no cap).
        max_source_positions: the model's source positions (longer sides truncated).
        max_target_positions: the same for the target.
        bucket_lengths: padded lengths of the buckets (default: `default_bucket_lengths`).
        cache_dir: directory for the tokenised cache (default: in memory).
        num_shards: input pipelines; each keeps every `num_shards`-th line.
        shard_index: this pipeline's shard.
        input_context: from `distribute_datasets_from_function`; overrides both.

    Returns:
        The batches with their `LengthStats` and bucket layout.
    """
    shard = shard_spec(input_context, num_shards, shard_index)
    limits = PipelineLimits.create(
        max_source_positions, max_target_positions, max_tokens, max_sentences, bucket_lengths
    )
    tokenized = cached_tokenized_pairs(
        source_path, target_path, tokenizer, shard, limits, evaluation=True, cache_dir=cache_dir
    )
    stats = count_length_stats(tokenized, limits, evaluation=True)
    return BatchedDataset(
        dataset=batch_pairs(tokenized, limits).prefetch(tf.data.AUTOTUNE),
        stats=stats,
        bucket_lengths=limits.bucket_lengths,
        batch_sizes=limits.batch_sizes,
    )


def make_shard_eval_dataset(
    shard_paths: Sequence[str],
    index: LengthIndex,
    *,
    max_tokens: int = 4000,
    max_sentences: int | None = None,
    max_source_positions: int = DEFAULT_MAX_POSITIONS,
    max_target_positions: int = DEFAULT_MAX_POSITIONS,
    bucket_lengths: Sequence[int] | None = None,
) -> BatchedDataset:
    """`make_eval_dataset` of a prepared split's shards: nothing to tokenise or count.

    Args:
        shard_paths: the split's shards (`PreparedData.shard_paths(split)`).
        index: their lengths index (`PreparedData.length_index(split)`).
        max_tokens: token budget per batch, padding included.
        max_sentences: at most this many sentences per batch (None or 0: no cap).
        max_source_positions: the model's source positions (longer sides truncated).
        max_target_positions: the same for the target.
        bucket_lengths: padded lengths of the buckets (default: `default_bucket_lengths`).

    Raises:
        CorruptShardError: a shard is not the one its index describes (size, checksum).
    """
    check_shards(shard_paths, index)
    limits = PipelineLimits.create(
        max_source_positions, max_target_positions, max_tokens, max_sentences, bucket_lengths
    )
    pairs = record_pairs(
        tf.data.Dataset.from_tensor_slices(list(shard_paths)), limits, evaluation=True
    )
    return BatchedDataset(
        dataset=batch_pairs(pairs, limits).prefetch(tf.data.AUTOTUNE),
        stats=index_length_stats(index, range(index.num_shards), limits, evaluation=True),
        bucket_lengths=limits.bucket_lengths,
        batch_sizes=limits.batch_sizes,
    )
