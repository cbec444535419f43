"""`python` for the docs' commands: `-m MODULE ...` and `-c CODE ...` run in a child of
`python_forkserver` (TensorFlow imported once), anything else in this interpreter.

Started as `python -S python_shim.py ARGS...` (no site packages: it starts in
milliseconds). It passes its stdin, stdout and stderr, working directory and environment
to the server named by `$PYTHON_FORKSERVER`, forwards SIGTERM, SIGINT and SIGHUP to the
child and ends as the child ended (its exit status, or killed by the same signal), so
that a caller sees the command as if this process ran it.
"""

import array
import json
import os
import signal
import socket
import sys


def _forked(path, arguments):
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(path)
    request = {"arguments": arguments, "cwd": os.getcwd(), "env": dict(os.environ)}
    client.sendmsg(
        [json.dumps(request).encode() + b"\n"],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]).tobytes())],
    )
    answers = client.makefile("r")
    pid = int(answers.readline())
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda number, _: os.kill(pid, number))
    line = answers.readline()
    if not line:  # only if the server went away
        raise SystemExit(f"python_shim: the fork server closed before child {pid} ended")
    return int(line)


def main():
    arguments = sys.argv[1:]
    path = os.environ.get("PYTHON_FORKSERVER")
    if not (path and len(arguments) >= 2 and arguments[0] in ("-m", "-c")):
        os.execv(sys.executable, [sys.executable, *arguments])
    status = _forked(path, arguments)
    if status < 0:
        if -status not in (signal.SIGKILL, signal.SIGSTOP):  # these have no handler
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


if __name__ == "__main__":
    main()
