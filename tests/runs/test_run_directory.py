"""Tests of `RunDirectory`: layout, config, resume guard, checkpoint choice, vocabularies."""

import os

import pytest
import tensorflow as tf
from helpers.models import small_model_config

from convs2s_tf.runs import CheckpointError, RunDirectory, build_model

MODEL_CONFIG = small_model_config(24, width=8, blocks=1, max_positions=16)


def _save(run, model, subdirectory, number):
    """Saves `model` as checkpoint `number` of `checkpoints/` or `best/`."""
    checkpoint = tf.train.Checkpoint(model=model)
    if subdirectory == "best":
        manager = run.best_checkpoint_manager(checkpoint)
    else:
        manager = run.checkpoint_manager(checkpoint, max_to_keep=3)
    return manager.save(checkpoint_number=number)


@pytest.fixture(scope="module")
def model():
    return build_model(MODEL_CONFIG)


def test_layout(tmp_path):
    run = RunDirectory(tmp_path / "run")
    assert run.path == str(tmp_path / "run")
    assert run.config_path == os.path.join(run.path, "config.json")
    assert run.checkpoints_dir == os.path.join(run.path, "checkpoints")
    assert run.best_dir == os.path.join(run.path, "best")
    assert run.epoch_ends_dir == os.path.join(run.path, "epoch_ends")
    assert run.averaged_dir == os.path.join(run.path, "averaged")
    assert run.recent_checkpoints() == run.epoch_end_checkpoints() == []
    assert run.worker_directory(1).path == os.path.join(run.path, "tmp_worker_1")
    assert RunDirectory("relative").absolute().path == os.path.abspath("relative")
    assert RunDirectory("gs://bucket/run").absolute().path == "gs://bucket/run"
    assert not run.holds_run()


def test_config_round_trip_and_missing_config(tmp_path):
    run = RunDirectory(tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="config.json does not exist: `model_dir` must"):
        run.read_config()
    run.write_config({"model": MODEL_CONFIG, "data_dir": "/data"})
    assert run.read_config() == {"model": MODEL_CONFIG, "data_dir": "/data"}
    assert sorted(os.listdir(run.path)) == ["config.json"]  # no temporary file left
    assert run.holds_run()


def test_resume_guard(tmp_path):
    run = RunDirectory(tmp_path)
    run_config = {"model": {"a": 1}, "data_fingerprint": "f1", "vocabulary_sha256": "v1"}
    run.check_same_run(run_config)  # nothing written yet
    run.write_config(run_config)
    run.check_same_run(dict(run_config, data_dir="/elsewhere"))
    run.check_same_run({"model": {"a": 1}})  # keys an imported run lacks
    for key, words in [
        ("model", "another model"),
        ("data_fingerprint", "other prepared data"),
        ("vocabulary_sha256", "another SentencePiece vocabulary"),
    ]:
        with pytest.raises(ValueError, match=f"describes {words} .*stored {key}="):
            run.check_same_run({**run_config, key: "changed"})


def test_checkpoint_choice(tmp_path, model):
    run = RunDirectory(tmp_path)
    with pytest.raises(CheckpointError, match="No checkpoint in .*best or .*checkpoints"):
        run.find_checkpoint()
    assert run.resume_checkpoint() is None
    latest = _save(run, model, "checkpoints", 7)
    assert run.find_checkpoint() == latest == run.resume_checkpoint()
    best = _save(run, model, "best", 5)
    # Inference takes the best checkpoint, a resumed run the latest.
    assert run.find_checkpoint() == best == run.best_checkpoint()
    assert run.resume_checkpoint() == latest == run.latest_checkpoint()
    assert run.find_checkpoint("explicit/ckpt-1") == "explicit/ckpt-1"
    averaged = run.averaged_checkpoint_manager(tf.train.Checkpoint(model=model)).save()
    # An averaged model (--average_last_n) comes before the best; resuming ignores it.
    assert run.find_checkpoint() == averaged == run.averaged_checkpoint()
    assert run.resume_checkpoint() == latest
    tf.io.gfile.rmtree(run.checkpoints_dir)
    assert run.resume_checkpoint() == best


def test_imported_run_vocabulary(tmp_path):
    for name in ("src.txt", "tgt.txt", "spm.model"):
        (tmp_path / name).write_text(name)
    run = RunDirectory(tmp_path / "run")
    entries = run.write_vocabulary(
        "fairseq_dictionary", str(tmp_path / "src.txt"), str(tmp_path / "tgt.txt"), None
    )
    assert entries["sentencepiece_model"] is None
    files = run.vocabulary_files({"model": MODEL_CONFIG, **entries})
    assert files.format == "fairseq_dictionary" and files.sentencepiece_model is None
    assert open(files.source).read() == "src.txt" and open(files.target).read() == "tgt.txt"
    entries = run.write_vocabulary(
        "fairseq_dictionary",
        str(tmp_path / "src.txt"),
        str(tmp_path / "tgt.txt"),
        str(tmp_path / "spm.model"),
    )
    files = run.vocabulary_files(entries)
    assert files.sentencepiece_model == os.path.join(run.path, "sentencepiece.model")
    assert open(files.sentencepiece_model).read() == "spm.model"
    assert run.vocabulary_files({"sentencepiece_model": "/abs/spm.model"}) is None
    assert run.sentencepiece_model({"sentencepiece_model": "/abs/spm.model"}) == "/abs/spm.model"
    assert run.sentencepiece_model({"sentencepiece_model": None}) is None
