"""Running the pipelines and helper scripts in subprocesses, from the repository root."""

import os
import re
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Beam search of the small exported model used by the export and serving tests.
SEARCH_FLAGS = ["--beam_size=3", "--max_len_a=1.2", "--max_len_b=5"]


def subprocess_env(**extra):
    """Environment of pipeline subprocesses: the repository importable, TF quiet."""
    return dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", **extra)


def run_python(arguments, stdin=None, check=True, timeout=600, cwd=ROOT, fork_server=None):
    """Runs `python ARGUMENTS...` from `cwd` (the repository root) with
    `subprocess_env()`; asserts it succeeded (printing the end of its stderr) unless
    `check` is False. With a `fork_server` (`helpers.python_forkserver.ForkServer`), the
    process is forked from it, TensorFlow imported already."""
    env, python = subprocess_env(), [sys.executable]
    if fork_server is not None:
        env["PYTHON_FORKSERVER"] = fork_server.path
        python = [sys.executable, "-S", fork_server.shim]
    result = subprocess.run(
        [*python, *arguments],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def free_ports(count):
    """`count` TCP ports of 127.0.0.1 that were free a moment ago."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_server(model_base_path, model_name, *flags):
    """Starts `pipelines.serve` on a free loopback port; returns `(process, address)`."""
    process, address, _ = start_server_with_banner(model_base_path, model_name, *flags)
    return process, address


def start_server_with_banner(model_base_path, model_name, *flags):
    """Starts `pipelines.serve` (with `flags`) on a free loopback port; returns
    `(process, address, first line)`.

    The server prints its address as its first line; a server that prints anything else
    is killed and the test fails with the end of its stderr.
    """
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipelines.serve",
            f"--model_base_path={model_base_path}",
            f"--model_name={model_name}",
            "--port=0",
            *flags,
        ],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline()
    match = re.search(r"on 127\.0\.0\.1:(\d+)", line)
    if not match:
        process.kill()
        raise AssertionError(f"server did not start: {line!r} {process.stderr.read()[-3000:]}")
    return process, f"127.0.0.1:{match.group(1)}", line
