"""Tests of resuming over torn checkpoints: the newest readable one is restored instead."""

import gc
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from helpers.models import small_model_config
from helpers.synthetic import make_trainer

from convs2s_tf.models import ConvS2S
from convs2s_tf.runs import CheckpointError, RunDirectory, latest_checkpoint
from convs2s_tf.runs.checkpoints import UnreadableCheckpointError
from convs2s_tf.training import Trainer, TrainingConfig, create_strategy

# Each restart collects garbage first: freezing the worker's heap keeps that cheap.
pytestmark = pytest.mark.usefixtures("frozen_heap")

STEPS = (2, 4, 6)
DATA = ".data-00000-of-00001"


@pytest.fixture
def run(tmp_path):
    """A run directory of `checkpoints/ckpt-{2,4,6}` and `best/ckpt-2`, written by a tiny
    trainer whose first weight holds the step; returns its path."""
    trainer = make_trainer(tmp_path)
    for step in STEPS:
        trainer.state.step.assign(step)
        trainer.model.weights[0].assign(tf.fill(trainer.model.weights[0].shape, float(step)))
        trainer.save(best=step == 2)
    return tmp_path


def _checkpoint(run, step, directory="checkpoints"):
    return str(run / directory / f"ckpt-{step}")


def _tear(prefix, how="truncate_data"):
    """Makes the checkpoint `prefix` unreadable."""
    data, index = prefix + DATA, prefix + ".index"
    if how == "truncate_data":
        content = open(data, "rb").read()
        open(data, "wb").write(content[: len(content) // 2])
    elif how == "garble_data":
        size = os.path.getsize(data)
        open(data, "wb").write(b"\x13" * size)
    elif how == "truncate_index":
        content = open(index, "rb").read()
        open(index, "wb").write(content[: len(content) // 2])
    elif how == "delete_index":
        os.remove(index)
    elif how == "delete_files":
        os.remove(index)
        os.remove(data)
    else:
        raise ValueError(how)


def _logged_warnings(caplog, function):
    """`(function(), the warnings it logged)`. Garbage is collected first: a checkpoint
    an earlier test restored in part, freed by the collector during `function`, would log
    TensorFlow's "deleted with unrestored values" warnings among these."""
    gc.collect()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        result = function()
    return result, [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _resume(run, caplog):
    """Resumes a new trainer from `run`; returns it, the path and the warnings logged."""
    trainer = make_trainer(run)
    path, warnings = _logged_warnings(caplog, trainer.restore_or_initialize)
    return trainer, path, warnings


def _assert_restored(trainer, step):
    assert int(trainer.state.step.numpy()) == step
    np.testing.assert_array_equal(trainer.model.weights[0].numpy(), step)


@pytest.mark.parametrize(
    "how", ["truncate_data", "garble_data", "truncate_index", "delete_index", "delete_files"]
)
def test_unreadable_latest_checkpoint_falls_back_to_the_previous_one(run, caplog, how):
    _tear(_checkpoint(run, 6), how)
    trainer, path, warnings = _resume(run, caplog)
    assert path == _checkpoint(run, 4)
    _assert_restored(trainer, 4)
    assert len(warnings) == 1
    assert warnings[0].startswith(f"Checkpoint {_checkpoint(run, 6)} is unreadable (")
    assert warnings[0].endswith(f"); resuming from {_checkpoint(run, 4)} instead.")
    # Training goes on from there: the next save replaces the torn checkpoint.
    trainer.state.step.assign(6)
    trainer.save()
    assert make_trainer(run).restore_or_initialize() == _checkpoint(run, 6)


def test_truncated_data_file_warning_names_the_reason(run, caplog):
    _tear(_checkpoint(run, 6))
    _, _, warnings = _resume(run, caplog)
    assert warnings == [
        f"Checkpoint {_checkpoint(run, 6)} is unreadable (IndexError: Read less bytes than "
        f"requested); resuming from {_checkpoint(run, 4)} instead."
    ]


def test_falls_back_to_best_past_every_unreadable_recent_checkpoint(run, caplog):
    for step in STEPS:
        _tear(_checkpoint(run, step))
    trainer, path, warnings = _resume(run, caplog)
    assert path == _checkpoint(run, 2, "best")
    _assert_restored(trainer, 2)
    assert len(warnings) == 1
    assert warnings[0].startswith(f"Checkpoint {_checkpoint(run, 6)} is unreadable (")
    assert warnings[0].endswith(
        f"; resuming from {path} instead (also unreadable: {_checkpoint(run, 4)}, "
        f"{_checkpoint(run, 2)})."
    )


def test_no_readable_checkpoint_is_an_error_naming_the_latest(run, caplog):
    for step in STEPS:
        _tear(_checkpoint(run, step))
    _tear(_checkpoint(run, 2, "best"), "garble_data")
    with pytest.raises(
        CheckpointError, match=f"Checkpoint {_checkpoint(run, 6)} cannot be restored"
    ):
        _resume(run, caplog)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    # The state file names checkpoints whose files are all gone: the error of today.
    for name in os.listdir(run / "checkpoints"):
        if name.startswith("ckpt-"):
            os.remove(run / "checkpoints" / name)
    with pytest.raises(CheckpointError, match="ckpt-6 named in .* is missing; refusing"):
        _resume(run, caplog)


def test_another_models_checkpoint_is_an_error_not_skipped(run, tmp_path_factory, caplog):
    other_dir = tmp_path_factory.mktemp("other")
    other = Trainer(
        lambda: ConvS2S(**small_model_config(30, dropout=0.0)),
        TrainingConfig(progress_bar=False),
        str(other_dir),
        create_strategy("one_device"),
    )
    other.state.step.assign(6)
    other.save()
    for suffix in (".index", DATA):
        shutil.copy(_checkpoint(other_dir, 6) + suffix, _checkpoint(run, 6) + suffix)
    with pytest.raises(CheckpointError, match="cannot be restored .ValueError: Received") as info:
        _resume(run, caplog)
    assert not isinstance(info.value, UnreadableCheckpointError)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


GARBAGE_STATES = {
    "empty": b"",
    "binary": b"\xff\xfe\x00\x80 torn",
    "unparsable": b'model_checkpoint_path: "ckpt-',
}


@pytest.mark.parametrize("content", GARBAGE_STATES.values(), ids=GARBAGE_STATES.keys())
def test_garbage_state_file_resumes_from_the_newest_readable(run, caplog, content):
    trainer = make_trainer(run)  # before the state file is torn (see the next test)
    state_file = run / "checkpoints" / "checkpoint"
    state_file.write_bytes(content)
    caplog.clear()
    assert trainer.restore_or_initialize() == _checkpoint(run, 6)
    _assert_restored(trainer, 6)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"Checkpoint state file {state_file} is unreadable (")
    assert warnings[0].endswith(f"; resuming from {_checkpoint(run, 6)} instead.")
    # Torn latest files too: the newest readable one.
    _tear(_checkpoint(run, 6))
    caplog.clear()
    assert trainer.restore_or_initialize() == _checkpoint(run, 4)
    _assert_restored(trainer, 4)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].endswith(
        f"; resuming from {_checkpoint(run, 4)} instead (also unreadable: {_checkpoint(run, 6)})."
    )


@pytest.mark.parametrize("content", GARBAGE_STATES.values(), ids=GARBAGE_STATES.keys())
def test_garbage_state_file_is_rebuilt_from_the_checkpoint_files(run, caplog, content):
    state_file = run / "checkpoints" / "checkpoint"
    state_file.write_bytes(content)
    run_directory = RunDirectory(run)
    with pytest.raises(CheckpointError, match="checkpoint state file .* is unreadable or empty"):
        latest_checkpoint(run_directory.checkpoints_dir)
    assert run_directory.recent_checkpoints() == [_checkpoint(run, step) for step in STEPS]
    # A CheckpointManager would fail over (or forget) them: the trainer rebuilds the file.
    trainer, warnings = _logged_warnings(caplog, lambda: make_trainer(run))
    assert len(warnings) == 1
    assert warnings[0].startswith(f"Checkpoint state file {state_file} is unreadable (")
    assert warnings[0].endswith(
        f"; rebuilt it from the checkpoint files, the latest {_checkpoint(run, 6)}."
    )
    assert latest_checkpoint(run_directory.checkpoints_dir) == _checkpoint(run, 6)
    path, warnings = _logged_warnings(caplog, trainer.restore_or_initialize)
    assert path == _checkpoint(run, 6) and not warnings
    _assert_restored(trainer, 6)
    # The rebuilt file lists every checkpoint: the manager keeps the last 3 of them.
    trainer.state.step.assign(8)
    trainer.save()
    assert run_directory.recent_checkpoints() == [_checkpoint(run, step) for step in (4, 6, 8)]
    assert not (run / "checkpoints" / f"ckpt-2{DATA}").exists()
