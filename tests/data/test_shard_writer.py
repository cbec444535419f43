"""Tests of the prepared records and shards: the wire format, worker processes, shuffling."""

import collections
import os

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from convs2s_tf.data import records
from convs2s_tf.data.length_index import LengthIndex
from convs2s_tf.data.shard_writer import ShardSpec, write_shards


def parse(record, evaluation):
    parsed = tf.io.parse_example(tf.constant([record]), records.feature_spec(evaluation))
    return {key: value[0].numpy() for key, value in parsed.items()}


def test_encoded_records_are_tf_examples():
    encoder = records.ExampleEncoder(40000)
    record = encoder.encode([5, 127, 128, 39999], [], 123456789, ("A dog .", "Ein Hund ."))
    example = tf.train.Example.FromString(record)  # a valid tf.train.Example
    assert list(example.features.feature["source"].int64_list.value) == [5, 127, 128, 39999]
    parsed = parse(record, evaluation=True)
    assert parsed["source"].tolist() == [5, 127, 128, 39999] and parsed["target"].size == 0
    assert parsed["index"] == 123456789
    assert parsed["source_text"] == b"A dog ." and parsed["reference_text"] == b"Ein Hund ."


def read_shards(directory, split):
    index = LengthIndex.load(os.path.join(directory, f"{split}.lengths.npz"))
    return index, [
        [bytes(r.numpy()) for r in tf.data.TFRecordDataset(os.path.join(directory, name))]
        for name in index.files
    ]


@pytest.mark.slow  # over ten seconds on 2 cores
def test_worker_processes_write_what_one_process_writes(small_prepared, tmp_path):
    data = small_prepared.data
    source_path, target_path = data.split_paths("train")
    spec = ShardSpec("train", source_path, target_path, num_shards=4, seed=3)
    written = {}
    for workers in (1, 2):
        directory = tmp_path / str(workers)
        directory.mkdir()
        stats = write_shards(
            spec, str(directory), data.sentencepiece_model_path, workers, min_pairs_for_workers=0
        )
        written[workers] = (stats, *read_shards(directory, "train"))
    assert written[1][0] == written[2][0]
    assert written[1][2] == written[2][2]  # the same records in the same shards and order
    index, shards = written[2][1], written[2][2]
    # Every pair once, with its line index and its lengths in the index.
    processor = spm.SentencePieceProcessor(model_file=data.sentencepiece_model_path)
    sources = open(source_path, encoding="utf-8").read().splitlines()
    seen = collections.Counter()
    for shard, shard_records in enumerate(shards):
        lengths = collections.Counter()
        for record in shard_records:
            parsed = parse(record, evaluation=False)
            line = int(parsed["index"])
            seen[line] += 1
            assert parsed["source"].tolist() == processor.encode(sources[line])
            lengths[(parsed["source"].size + 1, parsed["target"].size + 1)] += 1
        rows = index.shard == shard
        expected = {
            (int(s), int(t)): int(c)
            for s, t, c in zip(
                index.source_length[rows], index.target_length[rows], index.count[rows]
            )
        }
        assert lengths == expected
    assert seen == collections.Counter(range(len(sources)))
    # Shuffled globally: shards are filled at random and are not in corpus order.
    lines = [int(parse(r, False)["index"]) for r in shards[0]]
    assert lines != sorted(lines)
    assert np.ptp([len(s) for s in shards]) < len(sources) / 4
