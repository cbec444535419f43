"""Training under the distribution strategies equals training on one device."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers.subprocesses import ROOT, free_ports, run_python, subprocess_env

from convs2s_tf.runs import latest_checkpoint
from convs2s_tf.training import create_strategy


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="Unknown strategy 'tpu'"):
        create_strategy("tpu")


def test_mirrored_update_equals_single_device():
    """One update under a 2-logical-CPU MirroredStrategy equals the single-device one."""
    output = run_python(["-m", "tests.helpers.mirrored_update"], timeout=300)
    result = json.loads(output.stdout.strip().splitlines()[-1])
    assert result["moved"] > 1e-3  # the update really changed the weights
    assert result["differences"]["uneven"] < 1e-5
    assert result["differences"]["empty_replica"] < 1e-5


def test_multi_workers_take_clock_decisions_together_and_end_with_identical_weights(tmp_path):
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.helpers.multi_worker_train",
                    str(tmp_path / "run"),
                    str(tmp_path / f"weights_{index}.npz"),
                ],
                cwd=ROOT,
                env=subprocess_env(TF_CONFIG=tf_config),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=300)
            assert process.returncode == 0, stderr[-3000:]
            outputs.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for process in processes:
            process.kill()
    # Both stopped at worker 0's time limit (step 4 of 6), and both cooled down at worker
    # 1's first epoch end, once.
    assert [o["step"] for o in outputs] == [4, 4]
    assert [o["stop_reason"] for o in outputs] == ["reached the time limit"] * 2
    assert [o["learning_rate"] for o in outputs] == pytest.approx([0.025, 0.025])
    first = np.load(tmp_path / "weights_0.npz")
    second = np.load(tmp_path / "weights_1.npz")
    assert len(first.files) == len(second.files) > 10
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])
    # Only the chief wrote checkpoints and events into the run directory.
    assert latest_checkpoint(str(tmp_path / "run" / "checkpoints")).endswith("ckpt-4")
    assert not any(name.startswith("tmp_worker") for name in os.listdir(tmp_path / "run"))
