"""Subprocess: runs `python -m MODULE ...` and `python -c CODE` commands by fork, with
TensorFlow imported once (as `import pipelines` imports it, nothing more).

Importing TensorFlow costs about 5 s of CPU, most of what a docs command with a tiny
model does. This server imports it (and nothing that defines flags), then serves a Unix
socket: each connection sends one JSON line (the command's arguments after `python`,
its working directory and environment) with its stdin, stdout and stderr as file
descriptors (SCM_RIGHTS), and gets back the forked child's pid, then its exit status
(minus the signal that killed it, as `subprocess.Popen.returncode`). Each child is a
process of its own with its own pid, streams, signals and exit status; it starts as a
fresh interpreter with TensorFlow already loaded would. `python_shim.py` is the client.

    python -m tests.helpers.python_forkserver SOCKET_PATH

prints "ready" once it accepts connections, and serves until its stdin closes.
"""

import array
import json
import os
import runpy
import select
import shutil
import socket
import subprocess
import sys
import tempfile

# The repository: the server runs as `python -m tests.helpers.python_forkserver` there.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The client: `python -S SHIM ARGS...` runs `python ARGS...` through the server.
SHIM = os.path.join(ROOT, "tests", "helpers", "python_shim.py")


class ForkServer:
    """This server in a subprocess of its own, serving a fresh socket while in a `with`.

    Args:
        env: The server's environment, as the commands' would be (TensorFlow's C++ log
            level is read once, when it is imported here).

    Example:
        with ForkServer(env) as server:
            env["PYTHON_FORKSERVER"] = server.path  # python_shim.py's commands fork
    """

    def __init__(self, env):
        self.directory = tempfile.mkdtemp(prefix="forkserver")
        self.path = os.path.join(self.directory, "socket")
        self.shim = SHIM
        self.env = env

    def __enter__(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.python_forkserver", self.path],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout.readline() == "ready\n", "the fork server did not start"
        return self

    def __exit__(self, *_):
        self.process.stdin.close()  # the server's signal to end
        self.process.wait(timeout=60)
        shutil.rmtree(self.directory, ignore_errors=True)


def _receive(connection):
    """The request's JSON and its three file descriptors."""
    fds = array.array("i")
    data = b""
    while not data.endswith(b"\n"):
        message, ancillary, _, _ = connection.recvmsg(65536, socket.CMSG_SPACE(3 * fds.itemsize))
        if not message:
            raise EOFError("the client closed before its request ended")
        data += message
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return json.loads(data), list(fds)


def _run_child(request, fds):
    """The forked child: becomes the command and exits with its status."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    sys.path[:0] = [path for path in request["env"].get("PYTHONPATH", "").split(os.pathsep) if path]
    arguments = request["arguments"]
    # As `pipelines/__init__.py` on a process's start: the C++ log level its command line
    # and environment ask for (TensorFlow, already imported, reads it when it logs).
    from pipelines.console import configure_tensorflow_logging

    configure_tensorflow_logging(arguments[2:])
    status = 0
    try:
        if arguments[0] == "-m":
            sys.argv = [arguments[1], *arguments[2:]]
            sys.path.insert(0, request["cwd"])
            runpy.run_module(arguments[1], run_name="__main__", alter_sys=True)
        else:  # -c CODE
            sys.argv = ["-c", *arguments[2:]]
            sys.path.insert(0, "")
            exec(compile(arguments[1], "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as exit_:
        code = exit_.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
        status = code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:  # noqa: B036 - a child must never return into the server
        import traceback

        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def _status(wait_status):
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def serve(path):
    # What every pipeline imports first: TensorFlow, quieted as the environment asks.
    # Not tf-text: a command that needs its ops must import it itself, as it would in a
    # process of its own (a SavedModel's loader, for one).
    import pipelines  # noqa: F401

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    print("ready", flush=True)
    children = {}  # pidfd -> (pid, connection)
    while True:
        readable, _, _ = select.select([listener, sys.stdin, *children], [], [])
        if sys.stdin in readable and not sys.stdin.readline():
            return
        for pidfd in [fd for fd in readable if fd in children]:
            pid, connection = children.pop(pidfd)
            _, wait_status = os.waitpid(pid, 0)
            os.close(pidfd)
            connection.sendall(f"{_status(wait_status)}\n".encode())
            connection.close()
        if listener in readable:
            connection, _ = listener.accept()
            request, fds = _receive(connection)
            pid = os.fork()
            if pid == 0:
                listener.close()
                connection.close()
                _run_child(request, fds)
            for fd in fds:
                os.close(fd)
            connection.sendall(f"{pid}\n".encode())
            children[os.pidfd_open(pid)] = (pid, connection)


if __name__ == "__main__":
    serve(sys.argv[1])
