"""Tests of the training run's helpers: the time budget and its clock."""

import tensorflow as tf

from convs2s_tf.training.budget import TrainingClock
from convs2s_tf.training.run import WallClockLimit
from convs2s_tf.training.training_state import TrainingState


def test_wall_clock_limit_stops_before_an_epoch_would_overrun():
    limit = WallClockLimit(10)  # 600 s
    # After 340 s another 170 s epoch still fits (510 <= 600); after 510 s it would not.
    assert [limit.expired(seconds, 170.0) for seconds in (170.0, 340.0, 510.0)] == [
        False,
        False,
        True,
    ]
    assert not WallClockLimit(0).expired(1e9, 1e9)


def test_final_minutes_hold_from_the_first_check_inside_them():
    limit = WallClockLimit(10, final_minutes=3)  # cooldown from 420 s
    inside = [limit.in_final_minutes(seconds) for seconds in (170.0, 340.0, 430.0, 590.0)]
    assert inside == [False, False, True, True]
    assert not WallClockLimit(10).in_final_minutes(590.0)
    assert not WallClockLimit(0, final_minutes=3).in_final_minutes(590.0)


def test_the_clock_continues_the_seconds_a_checkpoint_restored(tmp_path):
    now = [1000.0]
    state = TrainingState(0.25)
    clock = TrainingClock(state, clock=lambda: now[0])
    clock.start()
    now[0] += 100.0
    clock.end_epoch(clock.forecast(at_epoch_end=True))  # a 100 s epoch
    now[0] += 30.0
    clock.record()
    path = tf.train.Checkpoint(state=state).save(str(tmp_path / "ckpt"))

    restored = TrainingState(0.25)
    tf.train.Checkpoint(state=restored).restore(path)
    now[0] = 5000.0  # another process, much later: only its own seconds count
    resumed = TrainingClock(restored, clock=lambda: now[0])
    resumed.start()
    assert resumed.seconds() == 130.0
    # At an epoch boundary the next epoch is expected to last as the last one did.
    assert resumed.forecast(at_epoch_end=False) == 100.0
    now[0] += 20.0
    assert resumed.seconds() == 150.0 and resumed.open_epoch_seconds() == 50.0
    restored.epoch_batches.assign(3)  # resumed inside an epoch: it is finished first
    assert resumed.forecast(at_epoch_end=False) == 0.0
