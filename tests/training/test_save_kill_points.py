"""Tests of killing a run at every point of its epoch-end save sequence: the restart
resumes, `best/` holds the lowest validation loss the state records, and what the cut
save left is ignored with one warning."""

import gc
import logging
import signal

import numpy as np
import pytest
import tensorflow as tf
from helpers.save_kills import (
    EPOCHS,
    LOSSES,
    POINTS,
    STEPS_PER_EPOCH,
    build_checkpoints,
    end_epoch,
    stop_at,
)
from helpers.subprocesses import run_python

from convs2s_tf.runs import RunDirectory

# Each restart collects garbage first: freezing the worker's heap keeps that cheap.
pytestmark = pytest.mark.usefixtures("frozen_heap")

# What `during`, `merging` and `state` leave: a `_temp` folder or a state file's temporary.
LEAVES_A_LEFTOVER = ("during", "merging", "state")


# The saves go to epoch_ends/, best/, checkpoints/ in turn, and both epochs stopped are
# new bests: stopping after one is stopping before the next.
_SAME_AS_THE_NEXT_BEFORE = ("after_epoch_ends", "after_best")


class _Stopped(BaseException):
    """Raised where the subprocess version kills itself (nothing catches it)."""


def _stop():
    raise _Stopped


def _epoch_of(path):
    """The epoch whose model the checkpoint `path` holds (see `end_epoch`)."""
    kernel = tf.train.load_variable(path, "model/kernel/.ATTRIBUTES/VARIABLE_VALUE")
    assert np.all(kernel == kernel[0])
    return int(kernel[0])


def _restart(run_dir, caplog):
    """Resumes fresh objects from `run_dir` and reads it as evaluation, export and
    averaging do; returns the checkpoints and the warnings all that logged."""
    gc.collect()  # no warning of an earlier test's freed objects among these
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        checkpoints = build_checkpoints(run_dir)
        resumed_from = checkpoints.resume()
        run = RunDirectory(run_dir)
        if resumed_from is not None:  # else there is nothing to evaluate
            run.find_checkpoint()
        run.epoch_end_checkpoints()
        run.recent_checkpoints()
    return checkpoints, [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _assert_best_holds_the_state_best(checkpoints, run_dir):
    state = checkpoints.state
    best = RunDirectory(run_dir).best_checkpoint()
    recorded = float(state.best_valid_loss.numpy())
    epochs_done = range(1, int(state.epoch.numpy()) + 1)
    if best is None:
        assert recorded == float("inf") and not epochs_done
        return
    assert recorded == LOSSES[_epoch_of(best)]
    # Best never lags: the epochs the state closed are no better than best/.
    assert all(LOSSES[epoch] >= recorded for epoch in epochs_done)


def _check_restart_and_finish(run_dir, epoch, point, caplog):
    """Restarts the run killed at `point` of `epoch`'s save, checks it, and ends it."""
    checkpoints, warnings = _restart(run_dir, caplog)
    state = checkpoints.state
    resumed = int(state.epoch.numpy())
    assert resumed in (epoch - 1, epoch)
    assert int(state.step.numpy()) == resumed * STEPS_PER_EPOCH
    assert float(checkpoints.model.kernel.numpy()[0]) == resumed
    _assert_best_holds_the_state_best(checkpoints, run_dir)
    ignored = [w for w in warnings if w.startswith("Ignoring ")]
    expected = 1 if point.split("_")[0] in LEAVES_A_LEFTOVER else 0
    assert len(ignored) == expected, warnings
    for later in range(resumed + 1, EPOCHS + 1):
        end_epoch(checkpoints, later)
    run = RunDirectory(run_dir)
    assert run.latest_checkpoint().endswith(f"ckpt-{EPOCHS * STEPS_PER_EPOCH}")
    assert _epoch_of(run.best_checkpoint()) == min(LOSSES, key=LOSSES.get)
    assert [_epoch_of(path) for path in run.epoch_end_checkpoints()] == list(LOSSES)


@pytest.mark.parametrize("epoch", [1, 2])
@pytest.mark.parametrize("point", [p for p in POINTS if p not in _SAME_AS_THE_NEXT_BEFORE])
def test_stopped_at_any_point_of_a_save_the_run_resumes(tmp_path, caplog, epoch, point):
    checkpoints = build_checkpoints(tmp_path)
    for done in range(1, epoch):
        end_epoch(checkpoints, done)
    with stop_at(checkpoints, point, _stop), pytest.raises(_Stopped):
        end_epoch(checkpoints, epoch)
    _check_restart_and_finish(tmp_path, epoch, point, caplog)


# The points the issue names, in `checkpoints/` (latest) and `best/`, at the save of the
# run's lowest loss ("after best" is "before checkpoints"), and the first save cut in
# `best/` (the run could never restart). Each is a TensorFlow process of 5 s or more: the
# slow tier runs them.
_SIGKILLED = [(1, "merging_best")] + [
    (2, point)
    for point in (
        "before_best",
        "during_best",
        "before_checkpoints",
        "during_checkpoints",
        "after_checkpoints",
        "state_checkpoints",
    )
]


@pytest.mark.slow
@pytest.mark.parametrize("epoch, point", _SIGKILLED)
def test_sigkilled_at_a_point_of_a_save_the_run_resumes(
    tmp_path, caplog, epoch, point, fork_server
):
    result = run_python(
        ["-m", "tests.helpers.save_kills", str(tmp_path), str(epoch), point],
        check=False,
        fork_server=fork_server,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
    _check_restart_and_finish(tmp_path, epoch, point, caplog)


def test_a_redone_epoch_replaces_best_only_with_a_better_model(tmp_path, caplog):
    checkpoints = build_checkpoints(tmp_path)
    end_epoch(checkpoints, 1)
    with stop_at(checkpoints, "after_best", _stop), pytest.raises(_Stopped):
        end_epoch(checkpoints, 2)  # best/ holds epoch 2 (loss 1.0), checkpoints/ epoch 1
    resumed, warnings = _restart(tmp_path, caplog)
    assert float(resumed.state.best_valid_loss.numpy()) == LOSSES[2]
    assert len(warnings) == 1 and "a better model replaces it" in warnings[0]
    # Redone, the epoch validates worse (another order of the same batches, say).
    end_epoch(resumed, 2, loss=1.2)
    assert _epoch_of(RunDirectory(tmp_path).best_checkpoint()) == 2
    assert RunDirectory(tmp_path).latest_checkpoint().endswith("ckpt-20")


@pytest.mark.parametrize("first_epoch_best", [True, False])
def test_a_best_that_lags_the_state_is_replaced_by_the_next_better_model(
    tmp_path, caplog, first_epoch_best
):
    """A run saved latest before best (as before) and killed between them."""
    checkpoints = build_checkpoints(tmp_path)
    if first_epoch_best:
        end_epoch(checkpoints, 1)
    state = checkpoints.state
    epoch = 2 if first_epoch_best else 1
    state.step.assign(epoch * STEPS_PER_EPOCH)
    state.best_valid_loss.assign(LOSSES[epoch])
    state.epoch.assign(epoch)
    checkpoints.manager.save(checkpoint_number=state.step)
    resumed, warnings = _restart(tmp_path, caplog)
    assert float(resumed.state.best_valid_loss.numpy()) == (
        LOSSES[1] if first_epoch_best else float("inf")
    )
    assert len(warnings) == 1 and "a save was interrupted" in warnings[0]
    end_epoch(resumed, epoch + 1)  # loss 1.5 (or 1.0): better than best/'s model
    assert _epoch_of(RunDirectory(tmp_path).best_checkpoint()) == epoch + 1
