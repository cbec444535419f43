"""One preparer per data directory across processes (convs2s_tf.data.preparation_lock)."""

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest
from helpers.subprocesses import ROOT, subprocess_env

from convs2s_tf.data import preparation_lock
from convs2s_tf.data.preparation_lock import LOCK_FILE, PreparationLock, prepare_once

# Waits until both contenders are ready, then prepares once: a 1 s preparation that
# appends the contender's name to output.txt. Prints {"result": ..., "prepared": ...}.
CONTENDER = textwrap.dedent("""
    import json, os, sys, time
    from convs2s_tf.data.preparation_lock import prepare_once

    data_dir, sync_dir, name = sys.argv[1:]
    open(os.path.join(sync_dir, name), "w").close()
    while len(os.listdir(sync_dir)) < 2:
        time.sleep(0.005)
    output = os.path.join(data_dir, "output.txt")

    def prepare():
        time.sleep(1.0)
        with open(output, "a") as file:
            file.write(name + "\\n")
        return name

    result, prepared = prepare_once(
        data_dir,
        lambda: os.path.exists(output),
        prepare,
        stale_seconds=0.5,  # Shorter than the preparation: the heartbeat keeps it held.
        heartbeat_seconds=0.05,
        poll_seconds=0.02,
    )
    print(json.dumps({"result": result, "prepared": prepared}))
    """)

# Takes the lock, says so, and holds it until killed.
HOLDER = textwrap.dedent("""
    import sys, time
    from convs2s_tf.data.preparation_lock import PreparationLock

    PreparationLock(sys.argv[1]).acquire()
    print("held", flush=True)
    time.sleep(600)
    """)


class FakeTime:
    """A clock that only `sleep` advances."""

    def __init__(self):
        self.now = time.time()
        self.sleeps = 0

    def clock(self):
        return self.now

    def sleep(self, seconds):
        assert self.sleeps < 1000, "still waiting after 1000 polls"
        self.now += seconds
        self.sleeps += 1


def no_sleep(seconds):
    raise AssertionError("waited although the lock was free or stale")


def write_lock(data_dir, host, pid, mtime, **machine):
    """A lock file as another process writes it; its heartbeat (mtime) at `mtime`."""
    path = os.path.join(data_dir, LOCK_FILE)
    fields = {"host": host, "pid": pid, "token": uuid.uuid4().hex, "started": mtime, **machine}
    with open(path, "w", encoding="utf-8") as file:
        json.dump(fields, file)
    os.utime(path, (mtime, mtime))
    return path


def write_output(data_dir):
    """A preparation: appends a line to output.txt."""
    with open(os.path.join(data_dir, "output.txt"), "a", encoding="utf-8") as file:
        file.write("prepared\n")
    return "outputs"


def lock_messages(caplog, level):
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == level and record.name == "absl"
    ]


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "data"
    path.mkdir()
    return str(path)


def test_two_processes_prepare_once(tmp_path, data_dir):
    sync_dir = tmp_path / "sync"
    sync_dir.mkdir()
    contenders = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDER, data_dir, str(sync_dir), name],
            cwd=ROOT,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("first", "second")
    ]
    results = []
    try:
        for contender in contenders:
            stdout, stderr = contender.communicate(timeout=60)
            assert contender.returncode == 0, stderr[-3000:]
            results.append(json.loads(stdout))
    finally:
        for contender in contenders:
            contender.kill()
            contender.communicate()
    assert sorted(result["prepared"] for result in results) == [False, True]
    preparer = next(result["result"] for result in results if result["prepared"])
    with open(os.path.join(data_dir, "output.txt"), encoding="utf-8") as file:
        assert file.read() == preparer + "\n"
    assert [result["result"] for result in results if not result["prepared"]] == [None]
    assert os.listdir(data_dir) == ["output.txt"]


def test_killed_holder_is_taken_over(data_dir, caplog):
    caplog.set_level(logging.INFO)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, data_dir],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with open(os.path.join(data_dir, LOCK_FILE), encoding="utf-8") as file:
            fields = json.load(file)
        assert fields["pid"] == holder.pid
        assert set(fields) == {"host", "pid", "pid_namespace", "boot_id", "token", "started"}
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    # Same host, dead pid: taken over at once, without waiting out stale_seconds.
    output = os.path.join(data_dir, "output.txt")
    result = prepare_once(
        data_dir, lambda: os.path.exists(output), lambda: write_output(data_dir), sleep=no_sleep
    )
    assert result == ("outputs", True)
    (warning,) = lock_messages(caplog, logging.WARNING)
    assert f"pid {holder.pid} " in warning and "its process is gone" in warning
    assert os.listdir(data_dir) == ["output.txt"]


def test_old_heartbeat_of_another_host_is_taken_over(data_dir, caplog):
    caplog.set_level(logging.INFO)
    write_lock(data_dir, "other-host", 4242, time.time() - 3600)
    result = prepare_once(data_dir, lambda: False, lambda: write_output(data_dir), sleep=no_sleep)
    assert result == ("outputs", True)
    (warning,) = lock_messages(caplog, logging.WARNING)
    assert "other-host pid 4242 (heartbeat 3600" in warning
    assert os.listdir(data_dir) == ["output.txt"]


def test_fresh_heartbeat_of_another_host_is_waited_on(data_dir, caplog):
    caplog.set_level(logging.INFO)
    fake = FakeTime()
    path = write_lock(data_dir, "other-host", 4242, fake.now)
    with open(path, encoding="utf-8") as file:
        content = file.read()
    # The holder finishes after 5 polls of the waiter.
    result = prepare_once(
        data_dir,
        lambda: fake.sleeps >= 5,
        lambda: write_output(data_dir),
        stale_seconds=10.0,
        heartbeat_seconds=1.0,
        clock=fake.clock,
        sleep=fake.sleep,
    )
    assert result == (None, False)
    assert fake.sleeps == 5
    (waiting,) = lock_messages(caplog, logging.INFO)
    assert "Waiting for other-host pid 4242" in waiting
    assert not lock_messages(caplog, logging.WARNING)
    with open(path, encoding="utf-8") as file:
        assert file.read() == content
    assert os.listdir(data_dir) == [LOCK_FILE]


def test_heartbeat_that_stops_is_taken_over_whatever_the_clocks(data_dir, caplog):
    caplog.set_level(logging.INFO)
    fake = FakeTime()
    # The file server's clock is an hour ahead of this host's: the heartbeat looks fresh
    # by the clock, but it never changes while the waiter watches.
    write_lock(data_dir, "other-host", 4242, fake.now + 3600)
    result = prepare_once(
        data_dir,
        lambda: False,
        lambda: write_output(data_dir),
        stale_seconds=10.0,
        heartbeat_seconds=1.0,
        clock=fake.clock,
        sleep=fake.sleep,
    )
    assert result == ("outputs", True)
    assert fake.sleeps == 11
    (warning,) = lock_messages(caplog, logging.WARNING)
    assert "no heartbeat for 11.0 s" in warning
    assert os.listdir(data_dir) == ["output.txt"]


def test_take_over_claimed_by_another_contender_is_waited_for(data_dir):
    fake = FakeTime()
    path = write_lock(data_dir, "other-host", 4242, fake.now - 3600)
    with open(path, encoding="utf-8") as file:
        token = json.load(file)["token"]
    # Another contender is taking this stale lock over: it has claimed it.
    claim = os.path.join(data_dir, f"{LOCK_FILE}.break.{token}")
    open(claim, "w").close()
    os.utime(claim, (fake.now, fake.now))
    result = prepare_once(
        data_dir,
        lambda: fake.sleeps == 5,
        lambda: write_output(data_dir),
        stale_seconds=10.0,
        heartbeat_seconds=1.0,
        clock=fake.clock,
        sleep=fake.sleep,
    )
    assert result == (None, False)  # It finished meanwhile.
    assert os.path.exists(claim) and os.path.exists(path)
    # That contender died: its claim is removed once stale, then the lock is taken over.
    result = prepare_once(
        data_dir,
        lambda: False,
        lambda: write_output(data_dir),
        stale_seconds=10.0,
        heartbeat_seconds=1.0,
        clock=fake.clock,
        sleep=fake.sleep,
    )
    assert result == ("outputs", True)
    assert fake.sleeps == 12
    assert os.listdir(data_dir) == ["output.txt"]


def test_release_during_take_over_leaves_one_holder(data_dir, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    holder = PreparationLock(data_dir, heartbeat_seconds=5.0, stale_seconds=10.0)
    assert holder.acquire()
    contender = PreparationLock(data_dir, poll_seconds=0.01)
    # The contender judges the live holder stale (its heartbeat seemed late).
    monkeypatch.setattr(contender, "_stale_reason", lambda *args: "it seemed stale")
    third, fourth = (PreparationLock(data_dir, is_done=lambda: True) for _ in range(2))
    rename, link = os.rename, os.link

    def release_then_rename(source, target):
        # The holder releases between the contender's check and its rename, and a third
        # process asks for the lock at once.
        monkeypatch.setattr(preparation_lock.os, "rename", rename)
        holder.release()
        third.acquire()
        rename(source, target)

    def another_then_link(source, target):
        # Putting back a lock moved by mistake races a fourth process.
        fourth.acquire()
        link(source, target)

    monkeypatch.setattr(preparation_lock.os, "rename", release_then_rename)
    monkeypatch.setattr(preparation_lock.os, "link", another_then_link)
    assert contender.acquire()
    holders = [lock for lock in (holder, contender, third, fourth) if lock.held]
    assert holders == [contender] and contender.still_held()
    contender.release()
    assert os.listdir(data_dir) == []


def test_heartbeat_survives_transient_errors(data_dir, monkeypatch, caplog):
    read_holder = preparation_lock.read_holder
    failures = []

    def fail_once_in_the_heartbeat(path):
        if threading.current_thread().name.startswith("heartbeat of") and not failures:
            failures.append(path)
            raise OSError(116, "Stale file handle")  # ESTALE, as NFS reports it.
        return read_holder(path)

    monkeypatch.setattr(preparation_lock, "read_holder", fail_once_in_the_heartbeat)
    path = os.path.join(data_dir, LOCK_FILE)
    with PreparationLock(data_dir, heartbeat_seconds=0.02, stale_seconds=5.0) as lock:
        deadline = time.time() + 5
        while not failures and time.time() < deadline:
            time.sleep(0.01)
        after_error = os.stat(path).st_mtime_ns
        while os.stat(path).st_mtime_ns == after_error and time.time() < deadline:
            time.sleep(0.01)
        assert failures and os.stat(path).st_mtime_ns > after_error
        assert lock.still_held()
    assert any("Stale file handle" in message for message in lock_messages(caplog, logging.WARNING))


def dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_same_hostname_on_another_machine_is_waited_on(data_dir, caplog):
    caplog.set_level(logging.INFO)
    fake = FakeTime()
    # Another machine (another boot id) with this one's hostname and the same (initial)
    # PID namespace: its pid means nothing here, so only its heartbeat can go stale.
    lock = PreparationLock(data_dir)
    write_lock(
        data_dir,
        socket.gethostname(),
        dead_pid(),
        time.time(),
        pid_namespace=lock._pid_namespace,
        boot_id="another-machine",
    )
    result = prepare_once(
        data_dir,
        lambda: fake.sleeps >= 5,
        lambda: write_output(data_dir),
        stale_seconds=10.0,
        heartbeat_seconds=1.0,
        clock=fake.clock,
        sleep=fake.sleep,
    )
    assert result == (None, False) and fake.sleeps == 5
    assert not lock_messages(caplog, logging.WARNING)


@pytest.mark.parametrize("skew", [3600.0, -3600.0])
def test_clock_skew_neither_breaks_a_live_lock_nor_keeps_a_dead_one(data_dir, caplog, skew):
    caplog.set_level(logging.INFO)

    def skewed_clock():
        return time.time() + skew

    holder = PreparationLock(data_dir, heartbeat_seconds=0.02, stale_seconds=0.3)
    assert holder.acquire()
    # A live holder (heartbeating) is waited on for 3 stale timeouts.
    deadline = time.time() + 1.0
    waiter = PreparationLock(
        data_dir,
        is_done=lambda: time.time() > deadline,
        stale_seconds=0.3,
        heartbeat_seconds=0.02,
        poll_seconds=0.02,
        clock=skewed_clock,
    )
    assert not waiter.acquire()
    assert holder.still_held() and not lock_messages(caplog, logging.WARNING)
    # A holder whose heartbeat stops is taken over once stale, whatever the clock.
    holder._stop_heartbeat.set()
    holder._heartbeat.join()
    started = time.time()
    waiter = PreparationLock(
        data_dir, stale_seconds=0.3, heartbeat_seconds=0.02, poll_seconds=0.02, clock=skewed_clock
    )
    assert waiter.acquire()
    assert 0.3 - 0.05 < time.time() - started < 5.0  # 0.05: the last beat came before
    (warning,) = lock_messages(caplog, logging.WARNING)
    assert "no heartbeat for" in warning
    waiter.release()


def test_error_in_prepare_releases_the_lock(data_dir):
    def fail():
        raise RuntimeError("corpus unreadable")

    with pytest.raises(RuntimeError, match="corpus unreadable"):
        prepare_once(data_dir, lambda: False, fail, heartbeat_seconds=0.01)
    assert os.listdir(data_dir) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("heartbeat of")]
    # The next caller prepares at once.
    result = prepare_once(data_dir, lambda: False, lambda: write_output(data_dir), sleep=no_sleep)
    assert result == ("outputs", True)


def test_contenders_for_a_stale_lock_hold_it_one_at_a_time(data_dir, caplog):
    caplog.set_level(logging.INFO)
    write_lock(data_dir, "other-host", 4242, time.time() - 3600)
    contenders = 8
    start = threading.Barrier(contenders)
    guard = threading.Lock()
    holding, most_holding, preparations = [0], [0], []

    def prepare():
        with guard:
            holding[0] += 1
            most_holding[0] = max(most_holding[0], holding[0])
        time.sleep(0.02)
        with guard:
            holding[0] -= 1
            preparations.append(threading.current_thread().name)

    def contend():
        start.wait()
        prepare_once(data_dir, lambda: False, prepare, poll_seconds=0.005)

    threads = [
        threading.Thread(target=contend, name=str(i), daemon=True) for i in range(contenders)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert sorted(preparations) == sorted(thread.name for thread in threads)
    assert most_holding[0] == 1
    (warning,) = lock_messages(caplog, logging.WARNING)
    assert "other-host pid 4242" in warning
    assert not lock_messages(caplog, logging.ERROR)
    assert os.listdir(data_dir) == []


def test_leftovers_of_dead_contenders_are_removed(data_dir):
    names = [f"{LOCK_FILE}.break.{uuid.uuid4().hex}", f"{LOCK_FILE}.stale.{uuid.uuid4().hex}"]
    for name, mtime in zip(names, (time.time() - 3600, time.time() - 3600)):
        path = os.path.join(data_dir, name)
        open(path, "w").close()
        os.utime(path, (mtime, mtime))
    fresh = f"{LOCK_FILE}.break.{uuid.uuid4().hex}"  # A contender at work.
    open(os.path.join(data_dir, fresh), "w").close()
    with PreparationLock(data_dir):
        assert sorted(os.listdir(data_dir)) == sorted([LOCK_FILE, fresh])


def test_lock_is_held_until_released(data_dir):
    lock = PreparationLock(data_dir, heartbeat_seconds=0.01, stale_seconds=5.0)
    assert lock.acquire() and lock.held
    other = PreparationLock(data_dir, is_done=lambda: True)
    assert not other.acquire() and not other.held
    lock.release()
    assert not lock.held and os.listdir(data_dir) == []
    with pytest.raises(ValueError, match="heartbeat_seconds < stale_seconds"):
        PreparationLock(data_dir, heartbeat_seconds=5.0, stale_seconds=5.0)
