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


def python_and_env(fork_server=None, **extra):
    """`(python, env)`: the interpreter's command and `subprocess_env(**extra)`, or with
    a `fork_server` (`helpers.python_forkserver.ForkServer`) a client that forks the
    command from it, TensorFlow imported already. Such a client forwards SIGTERM, SIGINT
    and SIGHUP to the command; SIGKILL would kill the client only."""
    env = subprocess_env(**extra)
    if fork_server is None:
        return [sys.executable], env
    env["PYTHON_FORKSERVER"] = fork_server.path
    return [sys.executable, "-S", fork_server.shim], env


def run_python(arguments, stdin=None, check=True, timeout=600, cwd=ROOT, fork_server=None):
    """Runs `python ARGUMENTS...` from `cwd` (the repository root) with
    `subprocess_env()`; asserts it succeeded (printing the end of its stderr) unless
    `check` is False. With a `fork_server` (`helpers.python_forkserver.ForkServer`), the
    process is forked from it, TensorFlow imported already."""
    python, env = python_and_env(fork_server)
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


def start_server(model_base_path, model_name, *flags, fork_server=None):
    """Starts `pipelines.serve` on a free loopback port; returns `(process, address)`."""
    process, address, _ = start_server_with_banner(
        model_base_path, model_name, *flags, fork_server=fork_server
    )
    return process, address


def start_server_with_banner(model_base_path, model_name, *flags, fork_server=None):
    """Starts `pipelines.serve` (with `flags`) on a free loopback port, forked from
    `fork_server` if given; returns `(process, address, first line)`. Stop it with
    `stop_server`.

    The server prints its address as its first line; a server that prints anything else
    is stopped and the test fails with the end of its stderr.
    """
    python, env = python_and_env(fork_server)
    process = subprocess.Popen(
        [
            *python,
            "-m",
            "pipelines.serve",
            f"--model_base_path={model_base_path}",
            f"--model_name={model_name}",
            "--port=0",
            *flags,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline()
    match = re.search(r"on 127\.0\.0\.1:(\d+)", line)
    if not match:
        stop_server(process)
        raise AssertionError(f"server did not start: {line!r} {process.stderr.read()[-3000:]}")
    return process, f"127.0.0.1:{match.group(1)}", line


def stop_server(process, timeout=30):
    """Stops a server started by `start_server` with SIGTERM (which a fork server's client
    forwards), then SIGKILL if it is still running after `timeout` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
