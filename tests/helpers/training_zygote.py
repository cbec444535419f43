"""Subprocess: starts training processes by fork, TensorFlow imported once.

Importing TensorFlow costs seconds of CPU; a test that restarts a run ten times would
spend most of its time there. This process imports it (and the pipeline) without
running anything, then forks one child per request: each child is a process of its own
(its own pid, signals, exit status, killed with nothing left behind) that runs
`tests.helpers.recorded_training` with the request's arguments, as
`python -m tests.helpers.recorded_training ARGS...` would.

Requests, one JSON line each on stdin, each answered by one JSON line on stdout:
    {"start": [ARGS...], "log": PATH}  ->  {"pid": PID}   (child's stdout+stderr to PATH)
    {"poll": PID}                      ->  {"status": STATUS or null (still running)}
    {"wait": PID}                      ->  {"status": STATUS}
STATUS is the exit status, or minus the signal that killed the child (as
`subprocess.Popen.returncode`).
"""

import json
import os
import sys

import tensorflow as tf  # noqa: F401  (imported once, before any fork)

from tests.helpers import recorded_training


def _child(arguments, log_path):
    """The forked child: runs the recorded training and exits with its status."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    sys.argv = ["recorded_training", *arguments]
    status = 0
    try:
        recorded_training.main()
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: B036 - a child must never return into the zygote
        import traceback

        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _status(wait_status):
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def main():
    for line in sys.stdin:
        request = json.loads(line)
        if "start" in request:
            pid = os.fork()
            if pid == 0:
                _child(request["start"], request["log"])
            answer = {"pid": pid}
        elif "poll" in request:
            pid, wait_status = os.waitpid(request["poll"], os.WNOHANG)
            answer = {"status": _status(wait_status) if pid else None}
        else:
            _, wait_status = os.waitpid(request["wait"], 0)
            answer = {"status": _status(wait_status)}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
