"""Prepared data is published whole (convs2s_tf.data.publication): racing preparers, a
paused holder, skewed clocks and look-alike hosts all leave one complete version."""

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest
import tensorflow as tf
from helpers.corpora import write_local_corpus
from helpers.subprocesses import ROOT, subprocess_env
from helpers.waiting import wait_for

from convs2s_tf.data import preparation_lock
from convs2s_tf.data.preparation_lock import LOCK_FILE, PreparationLock
from convs2s_tf.data.prepare import PrepareConfig, PreparedData, prepare_data
from convs2s_tf.data.shard_check import check_shards

# Short timeouts: a holder silent for 0.5 s is stale.
LOCK_OPTIONS = {"stale_seconds": 0.5, "heartbeat_seconds": 0.05, "poll_seconds": 0.02}

# Prepares, announcing (then pausing briefly) once it writes the first training pairs
# to its scratch files, so that the test can stop it there. Prints the outcome as JSON.
PAUSING_PREPARER = textwrap.dedent("""
    import json, sys, time
    from convs2s_tf.data import prepare, shard_writer

    count_lengths = shard_writer._count_lengths
    announced = []

    def announce_then_count(*args):
        if not announced:
            announced.append(True)
            print("writing shards", flush=True)
            time.sleep(0.5)
        return count_lengths(*args)

    shard_writer._count_lengths = announce_then_count
    config = prepare.PrepareConfig(**json.loads(sys.argv[1]))
    result = prepare.prepare_data(config, lock_options=json.loads(sys.argv[2]))
    print(json.dumps({"reused": result.reused, "version": result.data.data_dir}), flush=True)
    """)


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    return write_local_corpus(tmp_path_factory.mktemp("tiny_corpus"), 300, 20, 20)


def tiny_config(corpus, data_dir, **options):
    return PrepareConfig(
        data_dir=str(data_dir),
        dataset="local",
        split_prefixes=corpus,
        vocab_size=200,
        num_shards=3,
        workers=1,
        **options,
    )


def assert_one_complete_version(data_dir):
    """The data directory holds its pointer and one version, whose every shard holds
    exactly the pairs its index and summary count, each once."""
    names = sorted(os.listdir(data_dir))
    versions = [name for name in names if name.startswith("prepared-")]
    assert len(versions) == 1 and names == ["fingerprint.json", *versions], names
    data = PreparedData.load(str(data_dir))
    assert os.path.basename(data.data_dir) == versions[0]
    for split in data.splits:
        index, paths = data.length_index(split), data.shard_paths(split)
        assert check_shards(paths, index, checksum_limit_bytes=None)
        lines = []
        for path, pairs in zip(paths, index.pairs_per_shard().tolist()):
            examples = [
                tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)
            ]
            assert len(examples) == pairs
            lines += [example.features.feature["index"].int64_list.value[0] for example in examples]
        assert sorted(lines) == list(range(data.summary["splits"][split]["pairs_kept"]))
    return data


def run_in_threads(*calls):
    """Runs the calls in threads, returns their results (re-raising the first error)."""
    results, errors = [None] * len(calls), []

    def run(i):
        try:
            results[i] = calls[i]()
        except BaseException as error:  # noqa: B036 - re-raised below.
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise errors[0]
    return results


def test_racing_preparers_without_the_lock_publish_one_version(
    tiny_corpus, tmp_path, monkeypatch, caplog
):
    # The lock lets everyone in: correctness must not depend on it.
    def no_exclusion(self):
        self._token = uuid.uuid4().hex
        return True

    monkeypatch.setattr(PreparationLock, "acquire", no_exclusion)
    config = tiny_config(tiny_corpus, tmp_path / "data")
    start = threading.Barrier(2)

    def prepare():
        start.wait()
        return prepare_data(config)

    caplog.set_level(logging.INFO)
    results = run_in_threads(prepare, prepare)
    assert [result.reused for result in results] == [False, False]  # Both prepared.
    # The second to finish lost the rename and discarded its copy: the first one's stays.
    (lost,) = [r.getMessage() for r in caplog.records if "copy is discarded" in r.getMessage()]
    assert "published by another preparer meanwhile" in lost
    data = assert_one_complete_version(config.data_dir)
    assert results[0].data == results[1].data == data


@pytest.mark.parametrize("holder_skew, waiter_skew", [(-3600.0, 3600.0), (3600.0, -3600.0)])
def test_skewed_clocks_neither_break_a_live_lock(tiny_corpus, tmp_path, holder_skew, waiter_skew):
    config = tiny_config(tiny_corpus, tmp_path / "data")
    lock_file = os.path.join(config.data_dir, LOCK_FILE)

    def prepare(skew):
        options = {**LOCK_OPTIONS, "clock": lambda: time.time() + skew}
        return prepare_data(config, lock_options=options)

    def wait_then_prepare():
        wait_for(lambda: os.path.exists(lock_file))
        return prepare(waiter_skew)

    results = run_in_threads(lambda: prepare(holder_skew), wait_then_prepare)
    assert [result.reused for result in results] == [False, True]
    assert_one_complete_version(config.data_dir)


def test_two_machines_with_one_hostname_do_not_take_each_other_over(
    tiny_corpus, tmp_path, monkeypatch
):
    config = tiny_config(tiny_corpus, tmp_path / "data")
    lock_file = os.path.join(config.data_dir, LOCK_FILE)
    this_process = preparation_lock.this_process
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()

    def machine_of_the_thread():
        # Each thread runs on a machine of its own named like this one, where the
        # other's pid is that of no process.
        identity = this_process()
        name = threading.current_thread().name
        return {**identity, "boot_id": f"machine-{name}", "pid": gone.pid}

    monkeypatch.setattr(preparation_lock, "this_process", machine_of_the_thread)

    def wait_then_prepare():
        wait_for(lambda: os.path.exists(lock_file))
        return prepare_data(config, lock_options=LOCK_OPTIONS)

    results = run_in_threads(
        lambda: prepare_data(config, lock_options=LOCK_OPTIONS), wait_then_prepare
    )
    assert [result.reused for result in results] == [False, True]
    assert_one_complete_version(config.data_dir)


def test_holder_stopped_past_the_stale_timeout_then_resumed(tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, tmp_path / "data")
    fields = {key: getattr(config, key) for key in ("data_dir", "dataset", "vocab_size")}
    fields.update(split_prefixes=tiny_corpus, num_shards=3, workers=1)
    holder = subprocess.Popen(
        [sys.executable, "-c", PAUSING_PREPARER, json.dumps(fields), json.dumps(LOCK_OPTIONS)],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "writing shards\n"
        holder.send_signal(signal.SIGSTOP)  # Mid-preparation, holding the lock.
        time.sleep(2 * LOCK_OPTIONS["stale_seconds"])
        mine = prepare_data(config, lock_options=LOCK_OPTIONS)  # Takes the lock over.
        assert not mine.reused
        holder.send_signal(signal.SIGCONT)
        stdout, stderr = holder.communicate(timeout=60)
    finally:
        holder.kill()
        holder.communicate()
    assert holder.returncode == 0, stderr[-3000:]
    # The resumed holder found its work removed, waited for the lock and reused the data.
    assert json.loads(stdout) == {"reused": True, "version": mine.data.data_dir}
    assert "was taken over" in stderr
    assert_one_complete_version(config.data_dir)


def test_forced_preparation_replaces_the_version_whole(tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, tmp_path / "data")
    first = prepare_data(config)
    forced = prepare_data(config, force=True)
    assert not forced.reused and forced.data == first.data
    data = assert_one_complete_version(config.data_dir)
    with open(os.path.join(data.data_dir, "fingerprint.json"), encoding="utf-8") as file:
        publication = json.load(file)["publication"]
    with open(os.path.join(config.data_dir, "fingerprint.json"), encoding="utf-8") as file:
        pointer = json.load(file)
    assert pointer["publication"] == publication
    assert pointer["prepared"] == os.path.basename(data.data_dir)
