"""Tests of the tokenised pairs both pipelines read: sharding and the disk cache."""

import os

import pytest
from helpers.pipelines import epoch_pairs

from convs2s_tf.data.pipeline import make_eval_dataset


def test_shards_partition_the_corpus(data, tokenizer):
    shards = [
        make_eval_dataset(*data.split_paths("validation"), tokenizer, num_shards=3, shard_index=i)
        for i in range(3)
    ]
    indices = [
        sorted(int(i) for batch in shard.dataset for i in batch["index"].numpy())
        for shard in shards
    ]
    assert [shard.stats.pairs for shard in shards] == [len(i) for i in indices]
    assert sorted(sum(indices, [])) == list(range(200))
    assert indices[1][:3] == [1, 4, 7]
    with pytest.raises(ValueError, match="shard_index"):
        make_eval_dataset(*data.split_paths("validation"), tokenizer, num_shards=2, shard_index=2)


def test_disk_cache_is_written_once_and_reused(data, tokenizer, tmp_path):
    first = make_eval_dataset(*data.split_paths("validation"), tokenizer, cache_dir=str(tmp_path))
    files = sorted(os.listdir(tmp_path))
    assert files and all(name.startswith("eval-shard0of1-") for name in files)
    second = make_eval_dataset(*data.split_paths("validation"), tokenizer, cache_dir=str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == files
    assert second.stats == first.stats
    assert epoch_pairs(second.dataset)[0] == epoch_pairs(first.dataset)[0]
