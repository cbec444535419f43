"""Multi-worker training on loopback, as two hosts sharing a filesystem: 2 workers x 2
CPU replicas, one data directory and one run directory, started at once.

Each worker runs the real `pipelines.train` through `tests.helpers.recorded_training`,
which records the "index" (line in the prepared text) of every pair each step trained
on, and every checkpoint the process wrote.
"""

import collections
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf
from helpers.corpora import TINY_MODEL_FLAGS, local_corpus_flags
from helpers.subprocesses import ROOT, free_ports, python_and_env, run_python

from convs2s_tf.training.coordination import PREEMPTED_EXIT_STATUS

WORKERS = 2


def worker_command(tmp_path, corpus, index, extra, fork_server=None):
    return [
        *python_and_env(fork_server)[0],
        "-m",
        "tests.helpers.recorded_training",
        str(tmp_path / f"record_{index}.jsonl"),
        *local_corpus_flags(corpus),
        *TINY_MODEL_FLAGS,
        f"--data_dir={tmp_path / 'data'}",
        f"--model_dir={tmp_path / 'run'}",
        "--num_shards=8",
        "--strategy=multi_worker",
        "--cpu_replicas=2",
        "--max_tokens=120",
        "--training_dtype=float32",
        "--valid_beam_size=0",
        "--test_beam_size=0",
        "--progress_bar=false",
        "--save_every_steps=3",
        *extra,
    ]


def start_workers(tmp_path, corpus, extra, fork_server=None):
    ports = free_ports(WORKERS)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index in range(WORKERS):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        processes.append(
            subprocess.Popen(
                worker_command(tmp_path, corpus, index, extra, fork_server),
                cwd=ROOT,
                env=python_and_env(fork_server, TF_CONFIG=tf_config)[1],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return processes


def finish(processes, timeout=400):
    """Waits for every worker; returns [(exit status, stdout, stderr)]."""
    results = []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=timeout)
            results.append((process.returncode, stdout, stderr))
    finally:
        for process in processes:
            process.kill()
    return results


def lines(tmp_path, index):
    path = tmp_path / f"record_{index}.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def records(tmp_path, index, since=0):
    """The steps and saves worker `index` recorded, from line `since` on (lines cut short
    by a kill are left out)."""
    complete = []
    for line in lines(tmp_path, index)[since:]:
        try:
            complete.append(json.loads(line))
        except ValueError:
            pass
    return complete


def steps(tmp_path, index, since=0):
    return [line for line in records(tmp_path, index, since) if "step" in line]


def wait_until(condition, processes, timeout=300):
    deadline = time.time() + timeout
    while not condition():
        for process in processes:
            if process.poll() is not None:
                raise AssertionError(f"a worker exited early: {process.communicate()[1][-3000:]}")
        assert time.time() < deadline, "timed out"
        time.sleep(0.2)


def expected_indices(tmp_path):
    data_dir = tmp_path / "data"
    version = json.loads((data_dir / "fingerprint.json").read_text())["prepared"]
    summary = json.loads((data_dir / version / "summary.json").read_text())
    return list(range(summary["splits"]["train"]["pairs_kept"]))


def epoch_indices(step_records):
    by_epoch = collections.defaultdict(collections.Counter)
    for line in step_records:
        by_epoch[line["epoch"]].update(line["indices"])
    return by_epoch


@pytest.mark.slow  # several worker processes, three times
def test_killed_then_preempted_run_prepares_once_and_trains_every_pair_once_per_epoch(
    tmp_path, short_corpus, fork_server
):
    """Two epochs: both workers start over an unprepared data directory and are killed
    mid-epoch, restarted and preempted, restarted and run to the end."""
    extra = ["--max_epochs=2"]
    # 1. SIGKILL both workers mid-epoch (a lost job): steps after the last save are lost.
    processes = start_workers(tmp_path, short_corpus, extra, fork_server)
    wait_until(lambda: len(steps(tmp_path, 0)) >= 5, processes)  # past the save at step 3
    for index in range(WORKERS):
        # The worker itself (its fork server client passes SIGTERM on, not SIGKILL); the
        # client ends once the server has seen it die.
        pid = [line["pid"] for line in records(tmp_path, index) if "pid" in line][-1]
        os.kill(pid, signal.SIGKILL)
    killed_output = finish(processes)
    # Both started over an unprepared directory: one prepared it, the other waited.
    assert sum("Prepared " in stdout for _, stdout, _ in killed_output) == 1
    assert not list((tmp_path / "data").glob("*lock*"))
    killed = [steps(tmp_path, i) for i in range(WORKERS)]
    since = [len(lines(tmp_path, i)) for i in range(WORKERS)]
    # 2. Restart; SIGTERM one worker: every worker saves at the same step and exits 143.
    processes = start_workers(tmp_path, short_corpus, extra, fork_server)
    wait_until(lambda: len(steps(tmp_path, 1, since[1])) >= 2, processes)
    processes[1].send_signal(signal.SIGTERM)
    preempted = finish(processes)
    for status, _, stderr in preempted:
        assert status == PREEMPTED_EXIT_STATUS, stderr[-3000:]
    assert "Stopped by SIGTERM" in preempted[0][1]
    restarted = [steps(tmp_path, i, since[i]) for i in range(WORKERS)]
    resumed_at = restarted[0][0]["step"] - 1
    # The last save before the kill (every 3 steps); the kill can land right after one,
    # and then nothing was lost.
    assert resumed_at % 3 == 0 and resumed_at <= killed[0][-1]["step"]
    assert restarted[0][-1]["step"] == restarted[1][-1]["step"]
    since = [len(lines(tmp_path, i)) for i in range(WORKERS)]
    # 3. Restart again: the run continues from the SIGTERM's step to the end of epoch 2.
    results = finish(start_workers(tmp_path, short_corpus, extra, fork_server))
    for status, stdout, stderr in results:
        assert status == 0, stderr[-3000:]
    final = [steps(tmp_path, i, since[i]) for i in range(WORKERS)]
    assert final[0][0]["step"] == restarted[0][-1]["step"] + 1  # nothing lost, nothing replayed
    # Both workers took the same steps, with the same learning rate; only the chief wrote.
    assert final[0] and [s["step"] for s in final[0]] == [s["step"] for s in final[1]]
    assert [s["learning_rate"] for s in final[0]] == [s["learning_rate"] for s in final[1]]
    assert [line for line in records(tmp_path, 1) if "saved" in line] == []
    assert [line for line in records(tmp_path, 0) if "saved" in line]
    assert not [name for name in os.listdir(tmp_path / "run") if name.startswith("worker")]
    # Every pair exactly once an epoch, across workers and replicas, with the steps a kill
    # lost (after the last save) left out.
    trained = [
        line
        for i in range(WORKERS)
        for line in [s for s in killed[i] if s["step"] <= resumed_at] + restarted[i] + final[i]
    ]
    expected = collections.Counter(expected_indices(tmp_path))
    by_epoch = epoch_indices(trained)
    assert sorted(by_epoch) == [1, 2]
    for epoch in (1, 2):
        assert by_epoch[epoch] == expected, epoch


@pytest.mark.slow  # several worker processes
def test_workers_take_the_chiefs_decisions_and_end_with_identical_weights(tmp_path, fork_server):
    """Worker 1's validation loss and clock disagree with the chief's; every decision
    (anneal, best, time limit, cooldown) is still the chief's, on both workers."""
    ports = free_ports(WORKERS)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index in range(WORKERS):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        processes.append(
            subprocess.Popen(
                [
                    *python_and_env(fork_server)[0],
                    "-m",
                    "tests.helpers.multi_worker_train",
                    str(tmp_path / "run"),
                    str(tmp_path / f"weights_{index}.npz"),
                ],
                cwd=ROOT,
                env=python_and_env(fork_server, TF_CONFIG=tf_config)[1],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = []
    for status, stdout, stderr in finish(processes, timeout=300):
        assert status == 0, stderr[-3000:]
        outputs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert outputs[0]["decisions"] == outputs[1]["decisions"]
    assert outputs[0]["stop_reason"] == outputs[1]["stop_reason"] == "reached the time limit"
    # The chief's clock: the cooldown (0.25 -> 0.025) from its second epoch end, the
    # time limit at its third; worker 1's clock says both at once and is not asked.
    rates = [decision["learning_rate"] for decision in outputs[0]["decisions"]]
    assert rates[0] == 0.25 and rates[-1] <= 0.025 and len(rates) == 3
    assert outputs[1]["conditions_checked"] == 0
    weights = [np.load(tmp_path / f"weights_{index}.npz") for index in range(WORKERS)]
    for name in weights[0].files:
        np.testing.assert_array_equal(weights[0][name], weights[1][name])


@pytest.mark.slow  # several worker processes
def test_sigterm_to_a_worker_while_the_chief_validates_stops_both_within_a_batch(
    tmp_path, fork_server
):
    """Worker 1 gets SIGTERM while the chief validates 20 batches: its vote reaches the
    chief between two batches, both stop, and the run is saved with the epoch's steps
    done and its end (validation) still to come."""
    from convs2s_tf.training.trainer import PREEMPTED

    ports = free_ports(WORKERS)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index in range(WORKERS):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        processes.append(
            subprocess.Popen(
                [
                    *python_and_env(fork_server)[0],
                    "-m",
                    "tests.helpers.multi_worker_preemption",
                    str(tmp_path),
                ],
                cwd=ROOT,
                env=python_and_env(fork_server, TF_CONFIG=tf_config)[1],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = []
    for status, stdout, stderr in finish(processes, timeout=300):
        assert status == 0, stderr[-3000:]
        outputs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert [output["stop_reason"] for output in outputs] == [PREEMPTED, PREEMPTED]
    assert [output["step"] for output in outputs] == [2, 2]
    # The chief abandoned its validation within a batch of the vote (here at once: the
    # vote came before its first batch).
    assert outputs[0]["scored"] < 3 and outputs[1]["scored"] == 0
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / "checkpoints")))
    state = {
        name: int(reader.get_tensor(f"state/{name}/.ATTRIBUTES/VARIABLE_VALUE"))
        for name in ("step", "epoch", "epoch_batches")
    }
    assert state == {"step": 2, "epoch": 0, "epoch_batches": 2}


@pytest.mark.slow  # a process of its own (2 CPU replicas)
def test_workers_that_restored_different_positions_stop_with_one_line(fork_server):
    """The all-reduce that compares every worker's restored step, epoch position and
    data fingerprint with the chief's, under 2 CPU replicas (each one plays a worker)."""
    chief = {"step": 6, "epoch": 1, "epoch_batches": 2, "data": "fingerprint-a"}
    positions = [chief, {**chief, "step": 3}, {**chief, "epoch_batches": 0}]
    positions.append({**chief, "data": "fingerprint-b"})
    result = run_python(
        ["-m", "tests.helpers.worker_agreement", *map(json.dumps, positions)],
        timeout=300,
        fork_server=fork_server,
    )
    same, step, batches, data = json.loads(result.stdout.strip().splitlines()[-1])
    assert same == {"differing": 0, "line": None}
    assert [check["differing"] for check in (step, batches, data)] == [1, 1, 1]
    chiefs = "the chief step 6, epoch 1 (+2 batches), data "
    assert step["line"].startswith("This worker restored step 3, epoch 1 (+2 batches), data ")
    assert batches["line"].startswith("This worker restored step 6, epoch 1 (+0 batches)")
    assert data["line"].startswith("This worker restored step 6, epoch 1 (+2 batches), data ")
    for check in (step, batches, data):
        assert chiefs in check["line"] and "\n" not in check["line"]
    # The data fingerprints differ in the line, not only in the count.
    assert data["line"].split("data ")[1][:13] != data["line"].split("data ")[2][:13]
