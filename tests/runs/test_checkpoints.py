"""Tests of the checkpoint helpers: finding, inspecting and restoring checkpoints."""

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
