"""One preparer per data directory: a lock file that processes on several hosts agree on.

Training workers started together (several hosts, one data directory on a shared
filesystem such as NFS) all ask for their data to be prepared. Exactly one must prepare;
the others wait for it, then reuse its outputs. `prepare_once` does that, holding a
`PreparationLock`: the file `DATA_DIR/prepare.lock`.

The lock uses only operations that are atomic on local filesystems and on NFS (v3 and
later): exclusive creation (`O_CREAT | O_EXCL`), rename and unlink. `fcntl` and `flock`
locks are not used: on NFS they depend on a lock manager that is often missing or
misconfigured (some mounts make them silently host-local), and a lost host can leave
them held until an administrator steps in.

A holder that dies (SIGKILL, host lost) leaves its file behind. The file is *stale*, and
the next caller takes it over, when

- it was written on this machine (same hostname, boot id and PID namespace: hostnames
  alone repeat across machines, containers and pods) by a process that is gone; or
- its heartbeat stopped: while holding, a thread touches the file (its mtime) every
  `heartbeat_seconds`, riding out transient errors; a file untouched for
  `stale_seconds` is stale, judged by the file server's clock (a probe file the waiter
  touches gives its time, so no host's clock skew matters) and by how long the waiter
  has seen the same mtime.

Two contenders must never both take over one stale file: each would then remove the
other's fresh lock. So taking over a stale lock first claims it, by exclusively
creating `prepare.lock.break.<ID>` (ID names that one lock file); only the claimant,
after checking that the lock file is still the stale one, renames it to a unique
`prepare.lock.stale.<UUID>` and removes it, then creates its own lock like any caller.
A holder releasing its lock takes the same claim first, so a release never races a
take-over (which would leave two holders). Files left by a contender that died midway
are removed once they are `stale_seconds` old, so nothing ever needs deleting by hand.

The lock only avoids duplicate work: a holder paused past `stale_seconds` (SIGSTOP, a
paused VM) is taken over while it still runs, and both prepare. Correctness comes from
publishing the prepared data atomically (`publication`); `PreparationLock.still_held`
tells a holder whether it lost the lock.
"""

import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from absl import logging

from convs2s_tf.data.lock_files import (
    Holder,
    create_exclusively,
    process_exists,
    read_holder,
    remove_file,
    this_process,
)

__all__ = ["LOCK_FILE", "PreparationLock", "prepare_once"]

LOCK_FILE = "prepare.lock"
_BREAK_PREFIX = LOCK_FILE + ".break."
_STALE_PREFIX = LOCK_FILE + ".stale."
_PROBE_PREFIX = LOCK_FILE + ".probe."

# How many times a preparer whose lock was taken over (and whose preparation then
# failed) waits for the new holder before giving up.
_ATTEMPTS_AFTER_TAKE_OVER = 3

T = TypeVar("T")


class PreparationLock:
    """Exclusive right to prepare `data_dir`, for processes on any host sharing it.

    `acquire` creates `DATA_DIR/prepare.lock`, holding the JSON fields `host`, `pid`,
    `pid_namespace`, `boot_id`, `token` and `started`; the file's mtime is the
    heartbeat, renewed by a daemon thread until `release` removes the file. While another
    process holds the lock, `acquire` waits (logging once which holder it waits for),
    taking over a stale lock (see the module docstring; one warning names its holder),
    and gives up as soon as `is_done()` says that the data is ready.

    Args:
        data_dir: The data directory (created if missing).
        is_done: Called while waiting; when it returns True, `acquire` returns False
            without the lock.
        stale_seconds: A lock whose heartbeat is older than this is taken over. It must
            exceed `heartbeat_seconds` plus the filesystem's attribute caching (NFS:
            `acregmax`, 60 s by default); clock skew between hosts does not count, since
            heartbeats are aged by the file server's clock.
        heartbeat_seconds: Period of the holder's heartbeat.
        poll_seconds: Period of the waiter's checks.
        clock: Returns the time in seconds since the epoch (tests pass a fake one): how
            long the waiter has seen one heartbeat is measured with it; the age of a
            heartbeat is measured with the file server's clock.
        sleep: Waits the given number of seconds (tests pass a fake one).

    Example:

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as data_dir:
    ...     with PreparationLock(data_dir) as lock:
    ...         print(lock.held, os.listdir(data_dir))
    ...     print(lock.held, os.listdir(data_dir))
    True ['prepare.lock']
    False []
    """

    def __init__(
        self,
        data_dir: str,
        *,
        is_done: Callable[[], bool] | None = None,
        stale_seconds: float = 120.0,
        heartbeat_seconds: float = 10.0,
        poll_seconds: float = 1.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not 0 < heartbeat_seconds < stale_seconds:
            raise ValueError(
                f"Need 0 < heartbeat_seconds < stale_seconds, got {heartbeat_seconds} and "
                f"{stale_seconds}."
            )
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, LOCK_FILE)
        self._is_done = is_done
        self._stale_seconds = stale_seconds
        self._heartbeat_seconds = heartbeat_seconds
        self._poll_seconds = poll_seconds
        self._clock = clock
        self._sleep = sleep
        process = this_process()
        self._host: str = process["host"]
        self._boot_id: str = process["boot_id"]
        self._pid_namespace: str = process["pid_namespace"]
        self._pid: int = process["pid"]
        self._token: str | None = None
        self._stop_heartbeat = threading.Event()
        self._heartbeat: threading.Thread | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._token is not None

    @property
    def token(self) -> str | None:
        """The token of this object's lock file while held (unique to this holding)."""
        return self._token

    def acquire(self) -> bool:
        """Takes the lock, waiting while another process holds it.

        Returns:
            True once the lock is held; False if `is_done()` returned True first (the
            lock is then not held).
        """
        if self.held:
            raise RuntimeError(f"{self.path} is held by this object already.")
        os.makedirs(self.data_dir, exist_ok=True)
        announced: set[str] = set()
        seen, seen_since = ("", -1), 0.0
        while True:
            if self._create():
                return True
            holder = read_holder(self.path)
            if holder is None:  # Released meanwhile.
                continue
            now = self._clock()
            if (holder.instance, holder.mtime_ns) != seen:
                seen, seen_since = (holder.instance, holder.mtime_ns), now
            reason = self._stale_reason(holder, now - seen_since)
            if reason is not None and self._take_over(holder, reason, now):
                continue
            if self._is_done is not None and self._is_done():
                return False
            if holder.instance not in announced:
                announced.add(holder.instance)
                logging.info(
                    "Waiting for %s to prepare %s (lock %s).",
                    holder.describe(now),
                    self.data_dir,
                    self.path,
                )
            self._sleep(self._poll_seconds)

    def still_held(self) -> bool:
        """Whether the lock file is still this object's (False once taken over)."""
        if self._token is None:
            return False
        try:
            holder = read_holder(self.path)
        except OSError:
            return True  # Unknown; the heartbeat judges again.
        return holder is not None and holder.instance == self._token

    def release(self) -> None:
        """Stops the heartbeat and removes the lock file (if still this object's).

        Takes the take-over claim of its own lock file first: a contender taking the
        file over meanwhile (the holder looked stale) then owns its removal, instead of
        both removing it, the second one a newer holder's file.
        """
        if self._token is None:
            return
        token, self._token = self._token, None
        self._stop_heartbeat.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        claim = os.path.join(self.data_dir, _BREAK_PREFIX + token)
        if not create_exclusively(claim):
            logging.warning("%s is being taken over while this process releases it.", self.path)
            return
        try:
            holder = read_holder(self.path)
            if holder is not None and holder.instance == token:
                remove_file(self.path)
            else:
                logging.warning("%s was taken over while held by this process.", self.path)
        finally:
            remove_file(claim)

    def __enter__(self) -> "PreparationLock":
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    def _create(self) -> bool:
        """Creates the lock file and starts the heartbeat; False if the file exists."""
        token = uuid.uuid4().hex
        fields = {
            "host": self._host,
            "pid": self._pid,
            "pid_namespace": self._pid_namespace,
            "boot_id": self._boot_id,
            "token": token,
            "started": self._clock(),
        }
        if not create_exclusively(self.path, json.dumps(fields).encode("utf-8")):
            return False
        self._token = token
        self._stop_heartbeat = threading.Event()
        self._heartbeat = threading.Thread(
            target=self._beat, args=(token,), name=f"heartbeat of {self.path}", daemon=True
        )
        self._heartbeat.start()
        self._remove_leftovers()
        return True

    def _beat(self, token: str) -> None:
        """Touches the lock file every `heartbeat_seconds` while it is this object's.

        Any error (a transient NFS one: ESTALE, EIO, a timeout) is logged and the beat
        retried: a heartbeat thread that died would let a live holder go stale.
        """
        while not self._stop_heartbeat.wait(self._heartbeat_seconds):
            try:
                holder = read_holder(self.path)
                if holder is None or holder.instance != token:
                    logging.error(
                        "%s was taken over while held by this process (heartbeats late by "
                        "more than %g s?); another process may be preparing too.",
                        self.path,
                        self._stale_seconds,
                    )
                    return
                # No times given: the file server sets its own, as for the probe.
                os.utime(self.path)
            except OSError as error:  # Retried at the next beat.
                logging.warning("Heartbeat of %s failed: %s", self.path, error)

    def _same_machine(self, holder: Holder) -> bool:
        """Whether `holder` runs on this machine and PID namespace (its pid is ours to
        check). Without a boot id on either side, nothing says so."""
        return bool(self._boot_id) and (
            holder.host,
            holder.boot_id,
            holder.pid_namespace,
        ) == (self._host, self._boot_id, self._pid_namespace)

    def _stale_reason(self, holder: Holder, unchanged_for: float) -> str | None:
        """Why `holder`'s lock is stale, or None if it is not."""
        if self._same_machine(holder) and holder.pid > 0 and not process_exists(holder.pid):
            return "its process is gone"
        silence = unchanged_for
        server_now = self._server_time()
        if server_now is not None:
            silence = max(silence, server_now - holder.mtime)
        if silence > self._stale_seconds:
            return f"no heartbeat for {silence:.1f} s"
        return None

    def _server_time(self) -> float | None:
        """The file server's current time: the mtime of a file just created (None if that
        fails). Heartbeats are stamped by the same clock, so their age is exact whatever
        the clocks of this host and the holder's say."""
        probe = os.path.join(self.data_dir, _PROBE_PREFIX + uuid.uuid4().hex)
        try:
            descriptor = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            try:
                return os.fstat(descriptor).st_mtime
            finally:
                os.close(descriptor)
                remove_file(probe)
        except OSError:
            return None

    def _take_over(self, holder: Holder, reason: str, now: float) -> bool:
        """Removes `holder`'s stale lock file unless another contender is doing so.

        Returns:
            True if the lock file may be gone (try to create it again at once), False if
            another contender is taking it over (wait).
        """
        claim = os.path.join(self.data_dir, _BREAK_PREFIX + holder.instance)
        if not create_exclusively(claim):
            self._remove_if_stale(claim)  # Its contender died before removing it.
            return False
        try:
            current = read_holder(self.path)
            if current is None or (current.instance, current.mtime_ns) != (
                holder.instance,
                holder.mtime_ns,
            ):
                return True  # Taken over, released or touched since it was read.
            moved = os.path.join(self.data_dir, _STALE_PREFIX + uuid.uuid4().hex)
            try:
                os.rename(self.path, moved)
            except FileNotFoundError:
                return True
            removed = read_holder(moved)
            if removed is not None and removed.instance != holder.instance:
                # Replaced between the check and the rename: its holder was alive after
                # all and released it, or another claimant stalled for stale_seconds.
                # Put the new lock back.
                try:
                    os.link(moved, self.path)
                    logging.warning(
                        "%s was replaced while being taken over; put it back.", self.path
                    )
                except OSError as error:
                    logging.error(
                        "Could not put back %s taken over by mistake: %s", self.path, error
                    )
            else:
                logging.warning(
                    "Taking over the stale lock %s of %s: %s.",
                    self.path,
                    holder.describe(now),
                    reason,
                )
            remove_file(moved)
            return True
        finally:
            remove_file(claim)

    def _remove_if_stale(self, path: str) -> None:
        try:
            age = self._clock() - os.stat(path).st_mtime
        except FileNotFoundError:
            return
        if age > self._stale_seconds:
            remove_file(path)

    def _remove_leftovers(self) -> None:
        """Removes the stale claim and renamed files of contenders that died midway."""
        for name in os.listdir(self.data_dir):
            if name.startswith((_BREAK_PREFIX, _STALE_PREFIX, _PROBE_PREFIX)):
                self._remove_if_stale(os.path.join(self.data_dir, name))


def prepare_once(
    data_dir: str,
    is_prepared: Callable[[], bool],
    prepare: Callable[..., T],
    *,
    pass_lock: bool = False,
    **lock_options: Any,
) -> tuple[T | None, bool]:
    """Runs `prepare()` unless `data_dir` is prepared, in one process of all that call it.

    Checks `is_prepared()` first; if False, takes the `PreparationLock` of `data_dir`
    (waiting for another process, or until `is_prepared()` is True), checks again, and
    prepares if still needed. The lock is released however `prepare()` ends, so after an
    error the waiting processes try in turn. If `prepare()` fails after its lock was
    taken over (this process was paused past `stale_seconds`, and the new holder
    removed its unfinished work), it waits for the new holder instead of failing.

    Args:
        data_dir: The data directory.
        is_prepared: Whether the outputs are complete (e.g. the fingerprint matches).
        prepare: Writes the outputs; its result is returned.
        pass_lock: Call `prepare(lock)` with the `PreparationLock` held.
        **lock_options: Keyword arguments of `PreparationLock` (`stale_seconds`, ...).

    Returns:
        `(prepare(), True)` if this call prepared; `(None, False)` if the data was
        prepared already, or by another process meanwhile.

    Example:

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as data_dir:
    ...     print(prepare_once(data_dir, lambda: False, lambda: "outputs"))
    ...     print(prepare_once(data_dir, lambda: True, lambda: "outputs"))
    ('outputs', True)
    (None, False)
    """
    for attempt in range(_ATTEMPTS_AFTER_TAKE_OVER + 1):
        if is_prepared():
            return None, False
        with PreparationLock(data_dir, is_done=is_prepared, **lock_options) as lock:
            if not lock.held or is_prepared():
                return None, False
            try:
                return (prepare(lock) if pass_lock else prepare()), True
            except Exception as error:
                if lock.still_held() or attempt == _ATTEMPTS_AFTER_TAKE_OVER:
                    raise
                logging.warning(
                    "%s was taken over while this process prepared, which then failed "
                    "(%s); waiting for the new holder.",
                    lock.path,
                    error,
                )
    raise AssertionError("unreachable")
