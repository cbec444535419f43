"""Tests of the training pipeline: every pair once per epoch, buckets, budget, shards."""

import collections

import numpy as np
import pytest
import tensorflow as tf
from helpers.pipelines import epoch_pairs, expected_pairs

from convs2s_tf.data.batching import default_bucket_lengths
from convs2s_tf.data.pipeline import TrainingDatasetFn, make_training_dataset, max_sequence_length
from convs2s_tf.vocabulary import EOS_ID, PAD_ID


def test_every_kept_pair_once_per_epoch_within_budget(data, tokenizer):
    max_tokens, max_sentences = 700, 24
    batched = make_training_dataset(
        *data.split_paths("train"),
        tokenizer,
        max_tokens=max_tokens,
        max_sentences=max_sentences,
        seed=7,
    )
    expected = collections.Counter(expected_pairs(data, "train"))
    assert batched.stats.pairs == batched.stats.pairs_kept == sum(expected.values())
    assert batched.stats.pairs_too_long == 0
    orders = []
    for epoch_dataset in (batched.dataset, batched.dataset, batched.epoch(0), batched.epoch(1)):
        pairs, batches = epoch_pairs(epoch_dataset)
        assert collections.Counter(pairs) == expected  # each kept pair exactly once
        assert len(batches) == batched.stats.batches_per_epoch
        assert (
            sum(np.count_nonzero(b["target"] != PAD_ID) for b in batches)
            == batched.stats.target_tokens
        )
        for batch in batches:
            size, source_length = batch["source"].shape
            target_length = batch["target"].shape[1]
            assert size <= max_sentences
            assert size * source_length <= max_tokens and size * target_length <= max_tokens
            assert (
                source_length in batched.bucket_lengths and target_length in batched.bucket_lengths
            )
            assert batch["source"].dtype == batch["target"].dtype == np.int32
            # target_input is </s> then the target, shifted right, pads kept.
            shifted = np.concatenate([np.full((size, 1), EOS_ID), batch["target"][:, :-1]], axis=1)
            shifted[batch["target"] == PAD_ID] = PAD_ID
            np.testing.assert_array_equal(batch["target_input"], shifted)
            assert set(batch) == {"source", "target_input", "target"}
        orders.append(pairs)
    # Epochs are reshuffled; epoch datasets are fixed by (seed, epoch).
    assert orders[0] != orders[1] and orders[2] != orders[3]
    assert epoch_pairs(batched.epoch(1))[0] == orders[3]
    again = make_training_dataset(
        *data.split_paths("train"),
        tokenizer,
        max_tokens=max_tokens,
        max_sentences=max_sentences,
        seed=7,
    )
    assert epoch_pairs(again.dataset)[0] == orders[0]
    assert epoch_pairs(again.epoch(1))[0] == orders[3]


def test_fixed_buckets_give_few_shapes(data, tokenizer):
    batched = make_training_dataset(*data.split_paths("train"), tokenizer, max_tokens=4000)
    assert batched.bucket_lengths == default_bucket_lengths(1022)
    assert batched.batch_sizes[:3] == (2000, 1000, 666)  # lengths 2, 4, 6
    shapes = {(b["source"].shape[1], b["target"].shape[1]) for b in batched.dataset}
    # One shape per bucket used: a bounded set (fine buckets below 64 tokens, coarser
    # above), never one per batch.
    assert {s for s, _ in shapes} <= set(batched.bucket_lengths) and all(s == t for s, t in shapes)
    assert len(shapes) <= 40
    assert max_sequence_length(1024) == 1022


def test_overlong_training_pairs_are_dropped_and_counted(data, tokenizer):
    pairs = expected_pairs(data, "train")
    max_source, max_target = max_sequence_length(20), max_sequence_length(26)  # 18 and 24
    source_over = sum(len(s) > max_source for s, _ in pairs)
    target_over = sum(len(t) > max_target for _, t in pairs)
    fitting = [(s, t) for s, t in pairs if len(s) <= max_source and len(t) <= max_target]
    assert source_over > 0 and target_over > 0 and len(fitting) < len(pairs)
    batched = make_training_dataset(
        *data.split_paths("train"),
        tokenizer,
        max_tokens=200,
        max_source_positions=20,
        max_target_positions=26,
    )
    stats = batched.stats
    assert (stats.pairs, stats.source_too_long, stats.target_too_long) == (
        len(pairs),
        source_over,
        target_over,
    )
    assert stats.pairs_too_long == len(pairs) - len(fitting) == len(pairs) - stats.pairs_kept
    got, batches = epoch_pairs(batched.dataset)
    assert collections.Counter(got) == collections.Counter(fitting)
    assert len(batches) == stats.batches_per_epoch
    assert max(b["source"].shape[1] for b in batches) <= max_source
    assert max(b["target"].shape[1] for b in batches) <= max_target
    assert stats.as_dict()["pairs_too_long"] == stats.pairs_too_long


def test_training_dataset_fn_builds_each_shard_once(data, tokenizer):
    def context(pipeline_id):
        return tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline_id, num_replicas_in_sync=2
        )

    train_fn = TrainingDatasetFn(*data.split_paths("train"), tokenizer, max_tokens=1000, seed=3)
    halves = [epoch_pairs(train_fn(0, context(i)))[0] for i in range(2)]
    assert collections.Counter(halves[0] + halves[1]) == collections.Counter(
        expected_pairs(data, "train")
    )
    assert train_fn.batched(context(0)) is train_fn.batched(context(0))
    assert epoch_pairs(train_fn(5, context(1)))[0] == epoch_pairs(train_fn(5, context(1)))[0]
    # As a trainer calls it, through a strategy.
    distributed = tf.distribute.get_strategy().distribute_datasets_from_function(
        lambda input_context: train_fn(0, input_context)
    )
    assert sum(1 for _ in distributed) == train_fn.batched().stats.batches_per_epoch
    with pytest.raises(ValueError, match="input context"):
        TrainingDatasetFn(*data.split_paths("train"), tokenizer, num_shards=2)


def test_budget_below_the_longest_pairs_is_refused_only_if_such_pairs_exist(data, tokenizer):
    longest = max(max(len(s), len(t)) for s, t in expected_pairs(data, "train"))
    # A budget below the positions is fine while every pair fits it (it becomes a bucket).
    batched = make_training_dataset(*data.split_paths("train"), tokenizer, max_tokens=longest)
    assert longest in batched.bucket_lengths
    assert all(b["source"].shape[0] * b["source"].shape[1] <= longest for b in batched.dataset)
    with pytest.raises(ValueError, match=f"max_tokens={longest - 1}"):
        make_training_dataset(*data.split_paths("train"), tokenizer, max_tokens=longest - 1)
