"""Tests of the checkpoint helpers: finding, inspecting and restoring checkpoints."""

import logging

import pytest
import tensorflow as tf
from helpers.models import small_model_config

from convs2s_tf.runs import (
    CheckpointError,
    build_model,
    checkpoint_has,
    has_checkpoint_files,
    latest_checkpoint,
    restore_checkpoint,
)
from convs2s_tf.runs.checkpoint_directory import checkpoint_manager, checkpoints_by_step


def test_checkpoint_files_latest_checkpoint_and_contents(tmp_path):
    directory = str(tmp_path / "checkpoints")
    assert not has_checkpoint_files(directory) and latest_checkpoint(directory) is None
    model = build_model(small_model_config(24, width=8, blocks=1, max_positions=16))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), directory, 3)
    manager.save(checkpoint_number=4)
    path = manager.save(checkpoint_number=7)
    assert has_checkpoint_files(directory) and latest_checkpoint(directory) == path
    assert checkpoint_has(path, "model") and not checkpoint_has(path, "schedule")
    assert not checkpoint_has(str(tmp_path / "nowhere" / "ckpt-1"), "model")
    # The state file names a checkpoint whose files are gone: never start afresh.
    for name in tf.io.gfile.listdir(directory):
        if name.startswith("ckpt-7"):
            tf.io.gfile.remove(f"{directory}/{name}")
    with pytest.raises(CheckpointError, match="ckpt-7 named in .* is missing"):
        latest_checkpoint(directory)


def test_restore_names_the_checkpoint_that_cannot_be_used(tmp_path):
    config = small_model_config(24, width=8, blocks=1, max_positions=16)
    path = tf.train.Checkpoint(model=build_model(config)).save(str(tmp_path / "ckpt"))
    other = build_model({**config, "embed_dim": 16, "decoder_out_embed_dim": 16})
    with pytest.raises(CheckpointError, match=f"Checkpoint {path} cannot be restored"):
        restore_checkpoint(tf.train.Checkpoint(model=other), path)
    with pytest.raises(CheckpointError, match="does not exist"):
        restore_checkpoint(tf.train.Checkpoint(model=other), str(tmp_path / "ckpt-9"))
    restore_checkpoint(tf.train.Checkpoint(model=build_model(config)), path)


LEFT_BY_A_SAVE = (
    ": left by a checkpoint save that was interrupted (or is under way); once no run writes "
    "there, it can be deleted."
)


def test_what_an_interrupted_save_left_is_ignored_with_one_warning(tmp_path, caplog):
    directory = tmp_path / "best"
    model = build_model(small_model_config(24, width=8, blocks=1, max_positions=16))
    # A first save cut in TensorFlow's merge: shards in ckpt-3_temp/, the data moved, the
    # index torn; then the state file of another save cut before its rename.
    (directory / "ckpt-3_temp").mkdir(parents=True)
    (directory / "ckpt-3_temp" / "part-00000-of-00001.index").write_bytes(b"index")
    (directory / "ckpt-3.data-00000-of-00001").write_bytes(b"data")
    (directory / "ckpt-3.index").write_bytes(b"ind")
    (directory / "checkpoint.tmp0123abcd").write_text('model_checkpoint_path: "ckpt-3"\n')
    with caplog.at_level(logging.WARNING):
        assert not has_checkpoint_files(str(directory))
        assert latest_checkpoint(str(directory)) is None
        assert checkpoints_by_step(str(directory)) == []
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), directory, 1)
        path = manager.save(checkpoint_number=5)
        assert latest_checkpoint(str(directory)) == path
        assert checkpoints_by_step(str(directory)) == [path]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sorted(warnings) == [
        f"Ignoring {directory / 'checkpoint.tmp0123abcd'}{LEFT_BY_A_SAVE}",
        f"Ignoring {directory / 'ckpt-3_temp'} (and ckpt-3.data-00000-of-00001, ckpt-3.index "
        f"beside it){LEFT_BY_A_SAVE}",
    ]


def test_a_missing_state_file_is_rebuilt_by_a_manager(tmp_path, caplog):
    directory = str(tmp_path / "best")
    model = build_model(small_model_config(24, width=8, blocks=1, max_positions=16))
    checkpoint = tf.train.Checkpoint(model=model)
    path = tf.train.CheckpointManager(checkpoint, directory, 1).save(checkpoint_number=3)
    tf.io.gfile.remove(f"{directory}/checkpoint")  # the first save killed before its rename
    with pytest.raises(CheckpointError, match="no 'checkpoint' state file"):
        latest_checkpoint(directory)
    with caplog.at_level(logging.WARNING):
        manager = checkpoint_manager(checkpoint, directory, max_to_keep=1)
    assert [r.getMessage() for r in caplog.records] == [
        f"Checkpoint state file {directory}/checkpoint is unreadable (it is missing); rebuilt "
        f"it from the checkpoint files, the latest {path}."
    ]
    assert latest_checkpoint(directory) == path
    manager.save(checkpoint_number=4)  # and the manager replaces it as it should
    assert not tf.io.gfile.exists(path + ".index")
