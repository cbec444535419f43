"""Shards checked against their lengths index when a run opens them (shard_check)."""

import os
import shutil
import struct

import pytest
from helpers.corpora import TINY_MODEL_FLAGS, local_corpus_flags, write_local_corpus
from helpers.in_process import run_in_process

from convs2s_tf.data import shard_writer
from convs2s_tf.data.errors import CorruptShardError
from convs2s_tf.data.pipeline import TrainingData, make_shard_eval_dataset
from convs2s_tf.data.prepare import PrepareConfig, PreparedData, prepare_data


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """Two preparations of one tiny corpus with different seeds: the same shard names,
    other contents. Returns their version folders."""
    root = tmp_path_factory.mktemp("shard_check")
    corpus = write_local_corpus(root / "corpus", 300, 20, 20)
    return [
        prepare_data(
            PrepareConfig(
                data_dir=str(root / f"data{seed}"),
                dataset="local",
                split_prefixes=corpus,
                vocab_size=200,
                num_shards=3,
                workers=1,
                seed=seed,
            )
        ).data.data_dir
        for seed in (1, 2)
    ]


@pytest.fixture
def data(versions, tmp_path):
    """A copy of the first version folder, under a data directory of its own."""
    folder = tmp_path / "data" / os.path.basename(versions[0])
    shutil.copytree(versions[0], folder)
    return PreparedData.load(str(folder))


def open_training(data, **options):
    return TrainingData(data.shard_paths("train"), data.length_index("train"), **options)


def one_line_naming(error, path):
    """The error's message: one line naming the shard `path` and the command that
    prepares its data directory (the version folder's parent) again."""
    message = str(error.value)
    data_dir = os.path.dirname(os.path.dirname(path))
    assert "\n" not in message and path in message
    assert f"pipelines.prepare_data --data_dir={data_dir} --force_prepare" in message
    return message


def test_intact_shards_open(data):
    assert open_training(data).index.pairs == data.summary["splits"]["train"]["pairs_kept"]
    make_shard_eval_dataset(data.shard_paths("validation"), data.length_index("validation"))


def test_a_corrupt_shard_is_named_at_start(data):
    shard = data.shard_paths("train")[1]
    with open(shard, "r+b") as file:  # One flipped bit, in the middle of a record.
        file.seek(os.path.getsize(shard) // 2)
        byte = file.read(1)
        file.seek(-1, os.SEEK_CUR)
        file.write(bytes([byte[0] ^ 0x10]))
    with pytest.raises(CorruptShardError) as error:
        open_training(data)
    assert "does not match the checksum" in one_line_naming(error, shard)
    # Above the checksum limit only sizes are compared at start.
    open_training(data, checksum_limit_bytes=0)


def test_a_truncated_or_missing_shard_is_named_at_start(data):
    shard, other = data.shard_paths("train")[:2]
    os.truncate(shard, os.path.getsize(shard) - 3)
    with pytest.raises(CorruptShardError) as error:
        open_training(data, checksum_limit_bytes=0)
    assert "bytes, its lengths index says" in one_line_naming(error, shard)
    os.remove(other)
    validation = data.shard_paths("validation")[0]
    os.remove(validation)
    with pytest.raises(CorruptShardError) as error:
        make_shard_eval_dataset([validation], data.length_index("validation"))
    assert "is missing" in one_line_naming(error, validation)


def test_a_lengths_index_of_other_shards_is_refused_at_start(data, versions):
    # The other preparation's index: the same shard names, other pairs in them.
    shutil.copy(os.path.join(versions[1], "train.lengths.npz"), data.data_dir)
    with pytest.raises(CorruptShardError) as error:
        open_training(data)
    message = str(error.value)
    assert "\n" not in message and "lengths index" in message and "--force_prepare" in message
    # An index of another split (other shard names).
    with pytest.raises(CorruptShardError, match="is not the lengths index's shard"):
        TrainingData(data.shard_paths("validation"), data.length_index("test"))


def test_a_lengths_index_counting_other_pairs_than_the_summary_is_refused(data):
    summary_path = os.path.join(data.data_dir, "summary.json")
    data.summary["splits"]["train"]["pairs_kept"] += 1
    with pytest.raises(CorruptShardError, match="counts .* pairs, the summary"):
        data.length_index("train")
    assert os.path.isfile(summary_path)


def test_a_scratch_file_cut_short_is_refused(tmp_path):
    scratch = tmp_path / "train-00000-of-00001.tfrecord.scratch"
    header = struct.Struct("<I")
    scratch.write_bytes(header.pack(3) + b"abc" + header.pack(10) + b"short")
    with pytest.raises(OSError, match="cut short at byte .* \\(record 1\\)"):
        shard_writer._read_scratch(str(scratch))
    scratch.write_bytes(header.pack(3) + b"abc" + b"\x01\x00")
    with pytest.raises(OSError, match="cut short"):
        shard_writer._read_scratch(str(scratch))
    scratch.write_bytes(header.pack(3) + b"abc")
    assert shard_writer._read_scratch(str(scratch)) == [b"abc"]


def test_training_on_a_corrupt_shard_stops_at_start_in_one_line(
    small_corpus, small_prepared, tmp_path
):
    data_dir = tmp_path / "data"
    shutil.copytree(small_prepared.data.data_dir, data_dir)  # A copy of the version.
    shard = PreparedData.load(str(data_dir)).shard_paths("train")[0]
    with open(shard, "r+b") as file:
        file.seek(100)
        byte = file.read(1)
        file.seek(100)
        file.write(bytes([byte[0] ^ 0x01]))
    result = run_in_process(
        [
            "-m",
            "pipelines.train",
            *local_corpus_flags(small_corpus),
            *TINY_MODEL_FLAGS,
            f"--data_dir={data_dir}",
            f"--model_dir={tmp_path / 'run'}",
            "--progress_bar=false",
            "--test_beam_size=0",
        ],
        check=False,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    (line,) = [line for line in result.stderr.splitlines() if shard in line]
    assert f"--data_dir={data_dir} --force_prepare" in line
    assert "Traceback" not in result.stderr and not (tmp_path / "run" / "checkpoints").exists()
