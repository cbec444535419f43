"""The CPU cores this process may run on: how many searches, warm-up requests or
workers keep a machine busy."""

import os


def available_cores() -> int:
    """The cores this process may use: its CPU affinity where the system reports one
    (Linux; a container's or `taskset`'s limit), else every core (macOS has no affinity
    to ask)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1
