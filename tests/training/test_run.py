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


def test_final_minutes_hold_from_the_first_check_inside_them():
    now = [0.0]
    limit = WallClockLimit(10, final_minutes=3, clock=lambda: now[0])  # cooldown from 420 s
    inside = []
    for epoch_end in (170.0, 340.0, 430.0, 510.0, 590.0):
        now[0] = epoch_end
        inside.append(limit.in_final_minutes())
    assert inside == [False, False, True, True, True]
    assert not WallClockLimit(10, clock=lambda: now[0]).in_final_minutes()
    assert not WallClockLimit(0, final_minutes=3, clock=lambda: now[0]).in_final_minutes()
