"""Waiting for a condition another thread or process brings about, within a bound."""

import time


def wait_for(condition, timeout=60.0):
    """Polls `condition()` every 10 ms until it holds; fails the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
