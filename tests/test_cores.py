"""`convs2s_tf.cores`: the cores a process may use follow its CPU affinity."""

import os

import pytest

from convs2s_tf.cores import available_cores


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_available_cores_follow_the_affinity():
    allowed = os.sched_getaffinity(0)
    assert available_cores() == len(allowed)
    try:
        os.sched_setaffinity(0, {min(allowed)})
        assert available_cores() == 1
    finally:
        os.sched_setaffinity(0, allowed)
    assert available_cores() == len(allowed)
