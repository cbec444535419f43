"""Tests of the training run's helpers."""

from convs2s_tf.training.run import WallClockLimit


def test_wall_clock_limit_stops_before_an_epoch_would_overrun():
    now = [0.0]
    limit = WallClockLimit(10, clock=lambda: now[0])  # 600 s
    checks = []
    for epoch_end in (170.0, 340.0, 510.0):  # epochs of 170 s
        now[0] = epoch_end
        checks.append(limit.expired())
    # After 340 s another 170 s epoch still fits (510 <= 600); after 510 s it would not.
    assert checks == [False, False, True]
    assert not WallClockLimit(0, clock=lambda: now[0]).expired()
