"""The files of `preparation_lock`: what a lock file says, and the atomic file operations.

Only operations that are atomic on local filesystems and on NFS (v3 and later) are
used: exclusive creation (`O_CREAT | O_EXCL`), rename and unlink.
"""

import dataclasses
import json
import os
import re
import socket
from typing import Any

BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


@dataclasses.dataclass(frozen=True)
class Holder:
    """What a lock file says about its holder, and when it was last touched.

    Attributes:
        instance: Identifies this one lock file: its token, or its inode if the file is
            not (yet, or not wholly) written.
        host, pid, pid_namespace: Where the holder runs ("?", 0, "" if unknown).
        boot_id: Its machine's boot id ("" if unknown: older lock files, not Linux).
        mtime: Time of the last heartbeat (the file's mtime).
        mtime_ns: The same, in nanoseconds (compared exactly).
    """

    instance: str
    host: str
    pid: int
    pid_namespace: str
    boot_id: str
    mtime: float
    mtime_ns: int

    def describe(self, now: float) -> str:
        return f"{self.host} pid {self.pid} (heartbeat {now - self.mtime:.1f} s ago)"


def read_holder(path: str) -> Holder | None:
    """The holder of the lock file `path`, or None if there is no such file."""
    try:
        # Opening the file (not only stat-ing its path) makes an NFS client revalidate
        # its cached attributes, so that the mtime is the server's current one.
        with open(path, "rb") as file:
            status = os.fstat(file.fileno())
            content = file.read()
    except FileNotFoundError:
        return None
    try:
        fields = json.loads(content)
    except ValueError:  # Being written, or cut short by a crash.
        fields = None
    if not isinstance(fields, dict):
        fields = {}
    token, pid = fields.get("token"), fields.get("pid")
    return Holder(
        instance=(
            token
            if isinstance(token, str) and re.fullmatch(r"[0-9a-f]{32}", token)
            else f"inode-{status.st_ino}"
        ),
        host=str(fields.get("host", "?")),
        pid=pid if isinstance(pid, int) else 0,
        pid_namespace=str(fields.get("pid_namespace", "")),
        boot_id=str(fields.get("boot_id", "")),
        mtime=status.st_mtime,
        mtime_ns=status.st_mtime_ns,
    )


def pid_namespace() -> str:
    """This process's PID namespace ("pid:[4026531836]" on Linux; "" elsewhere).

    Containers on one host may share a hostname; their pids are only comparable within
    one namespace.
    """
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def boot_id() -> str:
    """This machine's boot id (Linux; "" elsewhere): unlike the hostname, it tells
    machines apart, and it changes when one reboots (so old pids mean nothing)."""
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as file:
            return file.read().strip()
    except OSError:
        return ""


def this_process() -> dict[str, Any]:
    """Where this process runs, as a lock file records it: `host`, `boot_id`,
    `pid_namespace` and `pid`."""
    return {
        "host": socket.gethostname(),
        "boot_id": boot_id(),
        "pid_namespace": pid_namespace(),
        "pid": os.getpid(),
    }


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, under another user.
        return True
    return True


def create_exclusively(path: str, content: bytes = b"") -> bool:
    """Creates `path` holding `content`; returns False if it exists already."""
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        try:
            os.write(descriptor, content)
        finally:
            os.close(descriptor)
    except BaseException:
        remove_file(path)
        raise
    return True


def remove_file(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
