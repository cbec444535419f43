"""Tests of a training run's checkpoints: resuming, the best one, errors."""

import shutil

import numpy as np
import pytest
from helpers.synthetic import EpochBatches, dataset, make_trainer

from convs2s_tf.runs import CheckpointError, latest_checkpoint


@pytest.mark.slow  # over ten seconds on 2 cores
def test_resume_from_best_when_checkpoints_are_gone(tmp_path):
    trainer = make_trainer(tmp_path, max_epochs=1, save_every_steps=0, valid_beam_size=0)
    trainer.train(
        EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=3)),
        valid_dataset=dataset(seed=99, batches=1),
    )
    best = latest_checkpoint(str(tmp_path / "best"))
    shutil.rmtree(tmp_path / "checkpoints")
    resumed = make_trainer(tmp_path, max_epochs=2, save_every_steps=0, valid_beam_size=0)
    assert resumed.restore_or_initialize() == best
    assert int(resumed.state.step.numpy()) == 3 and int(resumed.state.epoch.numpy()) == 1
    assert float(resumed.state.best_valid_loss.numpy()) < float("inf")


def test_resume_restores_state_and_optimizer(tmp_path, monkeypatch):
    # A relative model directory, as in the configs.
    monkeypatch.chdir(tmp_path)
    tmp_path = tmp_path.relative_to(tmp_path) / "run"
    trainer = make_trainer(tmp_path, max_steps=4, save_every_steps=2)
    trainer.train(
        EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=3), steps_per_epoch=3)
    )
    weights = [w.numpy() for w in trainer.model.weights]
    momentum = [v.numpy() for v in trainer.optimizer.variables]
    resumed = make_trainer(tmp_path, max_steps=4, save_every_steps=2)
    assert resumed.restore_or_initialize() is not None
    assert int(resumed.state.step.numpy()) == 4
    assert int(resumed.state.epoch.numpy()) == 1 and int(resumed.state.epoch_batches.numpy()) == 1
    for a, b in zip(weights, resumed.model.weights):
        np.testing.assert_array_equal(a, b.numpy())
    for a, b in zip(momentum, resumed.optimizer.variables):
        np.testing.assert_array_equal(a, b.numpy())


def test_corrupt_or_missing_checkpoint_is_an_error(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=2, save_every_steps=2)
    trainer.train(EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=3)))
    directory = tmp_path / "checkpoints"
    data_file = next(p for p in directory.iterdir() if p.name.startswith("ckpt-2.data"))
    data_file.write_bytes(b"\0garbage" * 10)
    with pytest.raises(CheckpointError, match="cannot be restored"):
        make_trainer(tmp_path).restore_or_initialize()
    for path in directory.iterdir():
        if path.name.startswith("ckpt-2"):
            path.unlink()
    with pytest.raises(CheckpointError, match="is missing; refusing to start afresh"):
        make_trainer(tmp_path).restore_or_initialize()
    (directory / "checkpoint").unlink()
    (directory / "ckpt-9.index").write_bytes(b"")
    with pytest.raises(CheckpointError, match="no 'checkpoint' state file"):
        latest_checkpoint(str(directory))
    # A trainer rebuilds the missing state file from the files, and fails on the torn one.
    with pytest.raises(CheckpointError, match="ckpt-9 cannot be restored"):
        make_trainer(tmp_path).restore_or_initialize()
