"""One time budget and one cooldown per run, however often it is preempted and resumed.

The trainer's clock is a fake one that advances 20 s with every batch, so a "3-minute"
budget with a 1.5-minute cooldown takes a few steps: epochs of 3 batches (60 s) end at
60 s (another epoch fits, no cooldown yet), 120 s (the cooldown: 0.25 -> 0.025) and
180 s (where the budget stops the run): 3 epochs, 9 updates, uninterrupted.
"""

import os
import signal

import pytest
from helpers.synthetic import EpochBatches, dataset, make_trainer

from convs2s_tf.training.budget import TrainingClock, WallClockLimit
from convs2s_tf.training.trainer import PREEMPTED

CONFIG = dict(save_every_steps=0, valid_beam_size=0, lr_patience=100, max_epochs=20)
SECONDS_PER_BATCH = 20.0


def _timed_trainer(model_dir, now, sigterm_at=None):
    """A trainer whose clock is `now[0]`, advanced by every batch; SIGTERM to this
    process once the clock reaches `sigterm_at`."""
    trainer = make_trainer(model_dir, **CONFIG)
    trainer.clock = TrainingClock(trainer.state, clock=lambda: now[0])
    trainer.time_limit = WallClockLimit(3, final_minutes=1.5)

    def tick(batch):
        now[0] += SECONDS_PER_BATCH
        if sigterm_at is not None and now[0] >= sigterm_at and not trainer.preemption.requested:
            os.kill(os.getpid(), signal.SIGTERM)

    trainer.after_batch = tick
    return trainer


def _train(trainer):
    return trainer.train(
        EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=3, sentences=3)),
        valid_dataset=dataset(seed=99, batches=1, sentences=3),
    )


@pytest.mark.slow  # three trainers, eight epoch ends
def test_a_preempted_run_keeps_one_budget_and_cools_down_once(tmp_path, capsys):
    """The issue's report: a 3-minute budget, a 1.5-minute cooldown, SIGTERM at 130 s,
    then the same command again. The resumed run must end where an uninterrupted one
    does (the module's docstring): 3 epochs, 9 updates, the rate shrunk once, 180 s."""
    now = [0.0]
    preempted = _train(_timed_trainer(tmp_path / "run", now, sigterm_at=130.0))
    # The SIGTERM after the 7th batch (140 s) stops after the next step, mid-epoch.
    assert preempted["stop_reason"] == PREEMPTED
    assert (preempted["step"], preempted["epoch"]) == (8, 2)
    now[0] += 3600.0  # the restart comes an hour later: wall time is not training time
    resumed_trainer = _timed_trainer(tmp_path / "run", now)
    resumed = _train(resumed_trainer)
    assert resumed["stop_reason"] == "reached the time limit"
    assert (resumed["epoch"], resumed["step"]) == (3, 9)
    assert resumed["learning_rate"] == pytest.approx(0.025)
    assert bool(resumed_trainer.state.cooled_down.numpy())
    assert resumed["train_seconds"] <= 180.0

    # The finished run, started again, says so and does nothing: no step, no shrink.
    capsys.readouterr()
    again = _train(_timed_trainer(tmp_path / "run", now))
    assert again["already_finished"] and again["stop_reason"] == "reached the time limit"
    assert (again["epoch"], again["step"]) == (3, 9)
    assert again["learning_rate"] == pytest.approx(0.025)
    assert "Nothing to train: the run in" in capsys.readouterr().out


def test_a_run_that_reached_max_epochs_trains_no_more_when_started_again(tmp_path, capsys):
    config = dict(max_epochs=1, save_every_steps=0, valid_beam_size=0)
    batches = EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=2, sentences=3))
    first = make_trainer(tmp_path, **config).train(batches)
    assert (first["step"], first["stop_reason"]) == (2, "reached max_epochs")
    again = make_trainer(tmp_path, **config).train(batches)
    assert again["already_finished"] and (again["step"], again["epoch"]) == (2, 1)
    assert "stopped at step 2, epoch 1 (reached max_epochs)" in capsys.readouterr().out
