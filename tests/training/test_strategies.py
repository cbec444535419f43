"""Training under the distribution strategies equals training on one device."""

import json

import pytest
from helpers.subprocesses import run_python

from convs2s_tf.training import create_strategy


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="Unknown strategy 'tpu'"):
        create_strategy("tpu")


@pytest.mark.slow  # over ten seconds on 2 cores
def test_mirrored_update_equals_single_device(fork_server):
    """One update under a 2-logical-CPU MirroredStrategy equals the single-device one."""
    output = run_python(
        ["-m", "tests.helpers.mirrored_update"], timeout=300, fork_server=fork_server
    )
    result = json.loads(output.stdout.strip().splitlines()[-1])
    assert result["moved"] > 1e-3  # the update really changed the weights
    assert result["differences"]["uneven"] < 1e-5
    assert result["differences"]["empty_replica"] < 1e-5
