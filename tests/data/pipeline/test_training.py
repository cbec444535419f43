"""Tests of the training pipeline: every pair once per epoch and worker set, budget,
resumable order, one dataset for the whole run."""

import collections

import numpy as np
import pytest
from helpers.pipelines import epoch_pairs, expected_pairs, unpad

from convs2s_tf.data.batching import default_bucket_lengths
from convs2s_tf.data.pipeline import (
    Placement,
    TrainingData,
    make_eval_dataset,
    make_shard_eval_dataset,
    max_sequence_length,
)
from convs2s_tf.vocabulary import EOS_ID, PAD_ID


def training_data(data, **kwargs):
    return TrainingData(data.shard_paths("train"), data.length_index("train"), **kwargs)


def epochs(dataset, epoch_length, count):
    """The first `count` epochs of a run's dataset: (pairs, batches) each."""
    iterator = iter(dataset)
    return [epoch_pairs(next(iterator) for _ in range(epoch_length)) for _ in range(count)]


def real(batches):
    return [b for b in batches if (b["index"] >= 0).any()]


def test_every_kept_pair_once_per_epoch_within_budget(data):
    max_tokens, max_sentences = 700, 24
    train = training_data(data, max_tokens=max_tokens, max_sentences=max_sentences, seed=7)
    expected = collections.Counter(expected_pairs(data, "train"))
    stats = train.stats()
    assert stats.pairs == stats.pairs_kept == sum(expected.values())
    assert stats.pairs_too_long == 0
    steps = train.steps_per_epoch(Placement())
    assert steps == stats.batches_per_epoch
    run = epochs(train.dataset(None), steps, 2)
    for pairs, batches in run:
        assert collections.Counter(pairs) == expected  # each kept pair exactly once
        assert sum(np.count_nonzero(b["target"] != PAD_ID) for b in batches) == stats.target_tokens
        for batch in batches:
            size, source_length = batch["source"].shape
            target_length = batch["target"].shape[1]
            assert size <= max_sentences
            assert size * source_length <= max_tokens and size * target_length <= max_tokens
            assert source_length in train.limits.bucket_lengths
            assert batch["source"].dtype == batch["target"].dtype == np.int32
            # target_input is </s> then the target, shifted right, pads kept.
            shifted = np.concatenate([np.full((size, 1), EOS_ID), batch["target"][:, :-1]], axis=1)
            shifted[batch["target"] == PAD_ID] = PAD_ID
            np.testing.assert_array_equal(batch["target_input"], shifted)
            assert set(batch) == {"source", "target_input", "target", "index"}
    # Epochs are reshuffled, and each epoch's order is fixed by (seed, epoch): a run
    # resumed at epoch 2, or 5 batches into it, sees what the uninterrupted run saw.
    assert run[0][0] != run[1][0]
    assert epochs(train.dataset(None, first_epoch=2), steps, 1)[0][0] == run[1][0]
    resumed = epochs(train.dataset(None, first_epoch=2, skip=5), steps - 5, 1)[0][0]
    assert resumed == [
        (unpad(s), unpad(t)) for b in run[1][1][5:] for s, t in zip(b["source"], b["target"])
    ]
    again = training_data(data, max_tokens=max_tokens, max_sentences=max_sentences, seed=7)
    assert epochs(again.dataset(None), steps, 1)[0][0] == run[0][0]


def test_blocks_are_batched_as_pair_by_pair_grouping_would(data):
    # Small blocks: each bucket's incomplete batch waits for the next block, so an epoch
    # has the batches of grouping the pairs one by one (`batch_pairs`): per bucket,
    # ceil(pairs / batch size), every batch full but the last of each bucket.
    train = training_data(data, max_tokens=600, shuffle_buffer_size=37, seed=3)
    steps = train.steps_per_epoch(Placement())
    assert steps == train.stats().batches_per_epoch
    (pairs, batches), (pairs_2, _) = epochs(train.dataset(None), steps, 2)
    expected = collections.Counter(expected_pairs(data, "train"))
    assert collections.Counter(pairs) == collections.Counter(pairs_2) == expected
    assert len(real(batches)) == steps
    sizes = dict(zip(train.limits.bucket_lengths, train.limits.batch_sizes))
    per_bucket = collections.defaultdict(list)
    for batch in batches:
        per_bucket[max(batch["source"].shape[1], batch["target"].shape[1])].append(
            len(batch["index"])
        )
    for length, counts in per_bucket.items():
        assert sum(size < sizes[length] for size in counts) <= 1
    from_pairs = collections.Counter(len(b["index"]) for b in pair_by_pair_batches(train))
    assert collections.Counter(len(b["index"]) for b in batches) == from_pairs


def pair_by_pair_batches(train):
    import tensorflow as tf

    from convs2s_tf.data.pipeline.batches import batch_pairs
    from convs2s_tf.data.pipeline.record_pairs import record_pairs

    files = tf.data.Dataset.from_tensor_slices(list(train.shard_paths))
    return list(
        batch_pairs(
            record_pairs(files, train.limits, evaluation=False), train.limits
        ).as_numpy_iterator()
    )


def test_workers_and_replicas_share_an_epoch_without_overlap(data):
    train = training_data(data, max_tokens=500)
    placement = Placement(num_workers=2, worker=0, replicas_per_worker=2)
    steps = train.steps_per_epoch(placement)
    per_worker = [train.stats(Placement(2, worker, 2)).batches_per_epoch for worker in (0, 1)]
    assert steps == -(-max(per_worker) // 2)
    assert sum(per_worker) > train.stats().batches_per_epoch - 2 * len(train.limits.bucket_lengths)
    shards = [train.worker_shards(Placement(2, worker, 2)) for worker in (0, 1)]
    assert not set(shards[0]) & set(shards[1])
    assert sorted(shards[0] + shards[1]) == list(range(data.length_index("train").num_shards))
    seen = []
    for worker in (0, 1):
        context = _context(num_workers=2, worker=worker, replicas=4)
        (pairs, batches), (pairs_2, _) = epochs(train.dataset(context), 2 * steps, 2)
        # The worker's real batches, then empty ones to the common epoch length.
        assert len(real(batches)) == per_worker[worker]
        for batch in batches[per_worker[worker] :]:
            assert batch["source"].tolist() == [[EOS_ID]] and batch["target"].tolist() == [[PAD_ID]]
        seen += [pair for pair in pairs if pair != ((EOS_ID,), (PAD_ID,))]
        assert collections.Counter(pairs) == collections.Counter(pairs_2)
    assert collections.Counter(seen) == collections.Counter(expected_pairs(data, "train"))
    with pytest.raises(ValueError, match="num_shards=1000"):
        train.worker_shards(Placement(num_workers=1000, worker=0))


def _context(num_workers, worker, replicas):
    import tensorflow as tf

    return tf.distribute.InputContext(
        num_input_pipelines=num_workers, input_pipeline_id=worker, num_replicas_in_sync=replicas
    )


def test_fixed_buckets_give_few_shapes(data):
    train = training_data(data, max_tokens=4000)
    assert train.limits.bucket_lengths == default_bucket_lengths(1022)
    assert train.limits.batch_sizes[:3] == (2000, 1000, 666)  # lengths 2, 4, 6
    _, batches = epochs(train.dataset(None), train.steps_per_epoch(Placement()), 1)[0]
    shapes = {(b["source"].shape[1], b["target"].shape[1]) for b in batches}
    assert {s for s, _ in shapes} <= set(train.limits.bucket_lengths)
    assert all(s == t for s, t in shapes) and len(shapes) <= 40
    assert max_sequence_length(1024) == 1022


def test_overlong_training_pairs_are_dropped_and_counted(data):
    pairs = expected_pairs(data, "train")
    max_source, max_target = max_sequence_length(20), max_sequence_length(26)  # 18 and 24
    source_over = sum(len(s) > max_source for s, _ in pairs)
    target_over = sum(len(t) > max_target for _, t in pairs)
    fitting = [(s, t) for s, t in pairs if len(s) <= max_source and len(t) <= max_target]
    assert source_over > 0 and target_over > 0 and len(fitting) < len(pairs)
    train = training_data(data, max_tokens=200, max_source_positions=20, max_target_positions=26)
    stats = train.stats()
    assert (stats.pairs, stats.source_too_long, stats.target_too_long) == (
        len(pairs),
        source_over,
        target_over,
    )
    assert stats.pairs_too_long == len(pairs) - len(fitting) == len(pairs) - stats.pairs_kept
    got, batches = epochs(train.dataset(None), train.steps_per_epoch(Placement()), 1)[0]
    assert collections.Counter(got) == collections.Counter(fitting)
    assert max(b["source"].shape[1] for b in batches) <= max_source
    assert max(b["target"].shape[1] for b in batches) <= max_target


def test_budget_below_the_longest_pairs_is_refused_only_if_such_pairs_exist(data):
    longest = max(max(len(s), len(t)) for s, t in expected_pairs(data, "train"))
    # A budget below the positions is fine while every pair fits it (it becomes a bucket).
    train = training_data(data, max_tokens=longest)
    assert longest in train.limits.bucket_lengths
    _, batches = epochs(train.dataset(None), train.steps_per_epoch(Placement()), 1)[0]
    assert all(b["source"].shape[0] * b["source"].shape[1] <= longest for b in batches)
    with pytest.raises(ValueError, match=f"max_tokens={longest - 1}"):
        training_data(data, max_tokens=longest - 1).stats()


def test_lengths_index_counts_what_the_counting_pass_counts(data, tokenizer):
    for split in ("validation", "test"):
        options = dict(max_tokens=300, max_source_positions=18, max_target_positions=22)
        from_text = make_eval_dataset(*data.split_paths(split), tokenizer, **options)
        from_shards = make_shard_eval_dataset(
            data.shard_paths(split), data.length_index(split), **options
        )
        assert from_shards.stats == from_text.stats
        text_pairs, _ = epoch_pairs(from_text.dataset)
        shard_pairs, shard_batches = epoch_pairs(from_shards.dataset)
        assert sorted(shard_pairs) == sorted(text_pairs)
        assert all("source_text" in batch for batch in shard_batches)
