"""Soak: a small run killed ten times at seeded random moments, each time restarted with
the same command, ends as the uninterrupted run does.

Each kill (SIGKILL or SIGTERM, seeded) comes once the process has trained past a
seeded target step; some targets are the last step of an epoch, so the kill lands in
its validation or its checkpoints. The run must end with the uninterrupted run's updates,
epochs and learning rate (one cooldown), every training pair trained on exactly once
per epoch (`tests.helpers.recorded_training` records the pairs of every step), and one
time budget whose seconds grow across the restarts.
"""

import collections
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from helpers.corpora import TINY_MODEL_FLAGS, local_corpus_flags
from helpers.in_process import run_in_process
from helpers.subprocesses import ROOT, subprocess_env

from convs2s_tf.data.prepare import PreparedData
from convs2s_tf.training.coordination import PREEMPTED_EXIT_STATUS

KILLS = 10
EPOCHS = 2
FLAGS = [
    *TINY_MODEL_FLAGS,
    "--max_tokens=1000",
    "--training_dtype=float32",
    "--valid_beam_size=0",
    "--test_beam_size=0",
    "--progress_bar=false",
    "--save_every_steps=3",
    f"--max_epochs={EPOCHS}",
    "--lr_patience=100",
    # A budget that does not bind, with a cooldown from its 3rd second of training on:
    # the rate is shrunk once (0.25 -> 0.025) at the first epoch end past it.
    "--max_train_minutes=10",
    "--anneal_final_minutes=9.95",
]


def _flags(corpus, tmp_path, run):
    return [
        *local_corpus_flags(corpus),
        *FLAGS,
        f"--data_dir={tmp_path / 'data'}",
        f"--model_dir={tmp_path / run}",
    ]


def _records(path):
    """The lines of one process' record (a line cut short by SIGKILL left out)."""
    lines = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            lines.append(json.loads(line))
        except ValueError:
            pass
    return [line for line in lines if "step" in line]


def _state(model_dir, name):
    path = tf.train.latest_checkpoint(str(model_dir / "checkpoints"))
    if path is None:
        return None
    return tf.train.load_checkpoint(path).get_tensor(f"state/{name}/.ATTRIBUTES/VARIABLE_VALUE")


class Zygote:
    """`tests.helpers.training_zygote`: training processes forked with TensorFlow
    imported, so that each restart costs its training, not an import."""

    def __init__(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.training_zygote"],
            cwd=ROOT,
            env=subprocess_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, **request):
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def _kill_past(zygote, arguments, log, record, target, signum, delay):
    """Starts the run, sends `signum` once it trained past step `target` (then waits
    `delay` s); returns its exit status (it may finish first)."""
    pid = zygote.ask(start=arguments, log=str(log))["pid"]
    deadline = time.time() + 300
    while time.time() < deadline:
        status = zygote.ask(poll=pid)["status"]
        if status is not None:
            return status
        records = _records(record)
        if records and records[-1]["step"] >= target:
            break
        time.sleep(0.02)
    time.sleep(delay)
    os.kill(pid, signum)
    started = time.time()
    status = zygote.ask(wait=pid)["status"]
    # A SIGTERM is answered within a bounded time: a step, a validation batch, a save.
    assert signum != signal.SIGTERM or time.time() - started < 60
    assert status in (-signal.SIGKILL, PREEMPTED_EXIT_STATUS, 0), log.read_text()[-3000:]
    return status


def _trained(records_by_process):
    """Every step the run kept: a step recorded again by a later process (replayed
    after a SIGKILL lost it) is that process' record."""
    kept = {}
    for records in records_by_process:
        for line in records:
            kept[line["step"]] = line
    return [kept[step] for step in sorted(kept)]


@pytest.mark.slow  # eleven training processes (forked: TensorFlow is imported once)
def test_ten_random_kills_end_as_the_uninterrupted_run(short_corpus, tmp_path):
    whole = run_in_process(["-m", "pipelines.train", *_flags(short_corpus, tmp_path, "whole")])
    assert "epoch   2 |" in whole.stdout
    steps = int(_state(tmp_path / "whole", "step"))
    steps_per_epoch = steps // EPOCHS
    rng = np.random.default_rng(54)
    # Seeded kill points, increasing: two at an epoch's last step (its end follows).
    targets = sorted(
        [steps_per_epoch, steps_per_epoch]
        + list(rng.choice(np.arange(2, steps - 2), KILLS - 2, replace=False))
    )
    records, statuses, seconds = [], [], []
    zygote = Zygote()
    try:
        for index, target in enumerate([*targets, steps + 1]):
            record, log = tmp_path / f"record_{index}.jsonl", tmp_path / f"log_{index}.txt"
            arguments = [str(record), *_flags(short_corpus, tmp_path, "run")]
            signum = signal.SIGTERM if rng.random() < 0.5 else signal.SIGKILL
            delay = 0.0 if target == steps_per_epoch else float(rng.uniform(0.0, 0.2))
            statuses.append(_kill_past(zygote, arguments, log, record, target, signum, delay))
            records.append(_records(record))
            seconds.append(_state(tmp_path / "run", "train_seconds"))
    finally:
        zygote.close()
    # The last start, past every target, ran to the end.
    assert statuses.pop() == 0, log.read_text()[-3000:]

    assert statuses.count(PREEMPTED_EXIT_STATUS) >= 2 and statuses.count(-signal.SIGKILL) >= 2
    # The uninterrupted run's updates, epochs and rate (shrunk once, by the cooldown).
    model_dir = tmp_path / "run"
    assert int(_state(model_dir, "step")) == steps
    assert int(_state(model_dir, "epoch")) == int(_state(tmp_path / "whole", "epoch")) == EPOCHS
    rates = [_state(directory, "learning_rate") for directory in (model_dir, tmp_path / "whole")]
    assert rates[0] == rates[1] == pytest.approx(0.025)
    assert bool(_state(model_dir, "cooled_down"))
    trained = _trained(records)
    assert [line["step"] for line in trained] == list(range(1, steps + 1))
    summary = PreparedData.load(str(tmp_path / "data")).summary
    expected = collections.Counter(range(summary["splits"]["train"]["pairs_kept"]))
    by_epoch = collections.defaultdict(collections.Counter)
    for line in trained:
        by_epoch[line["epoch"]].update(line["indices"])
    assert sorted(by_epoch) == list(range(1, EPOCHS + 1))
    for epoch in by_epoch:
        assert by_epoch[epoch] == expected, epoch
    # One budget: its seconds only grow from restart to restart, and stay within it.
    counted = [value for value in seconds if value is not None]
    assert counted == sorted(counted) and counted[-1] > counted[0]
    assert _state(model_dir, "train_seconds") <= 600.0
