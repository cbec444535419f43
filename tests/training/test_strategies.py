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
    """Two updates under a 2-logical-CPU MirroredStrategy equal the single-device ones,
    with either optimiser's fused kernels (Adam's on the uneven split only: the empty
    replica is the all-reduce's case, before any optimiser)."""
    command = ["-m", "tests.helpers.mirrored_update", "nag", "adam:uneven"]
    output = run_python(command, timeout=300, fork_server=fork_server)
    results = json.loads(output.stdout.strip().splitlines()[-1])
    assert sorted(results) == ["adam", "nag"]
    # Adam divides each update by the gradient's root mean square, so the all-reduce's
    # order of summation (an ulp of a small gradient) moves a weight by up to 1e-4 of
    # the update (Keras' own Adam here: 4.6e-5 of a 0.5 move).
    tolerances = {"nag": 1e-5, "adam": 2e-4 * results["adam"]["moved"]}
    for name, result in results.items():
        assert result["moved"] > 1e-3  # the update really changed the weights
        assert max(result["differences"].values()) < tolerances[name], name
    assert sorted(results["nag"]["differences"]) == ["empty_replica", "uneven"]
