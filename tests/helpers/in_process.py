"""Running a pipeline in the test's own process, as `python -m pipelines.NAME` would.

A pipeline run in a subprocess spends seconds importing TensorFlow before it does
anything; run here it costs only its own work. Each run parses its arguments over the
flags' defaults (every flag is reset before and after, so no value leaks from one run
into the next) and calls the module's `main` the way `pipelines.cli.run` does: a user
error is one line on stderr and exit status 2, a bug propagates with its traceback. The
process boundary stays the point of the tests that keep a subprocess (SIGKILL, servers,
several workers, the console's logging, `--help`).
"""

import contextlib
import dataclasses
import importlib
import io
import sys

import keras
import tensorflow as tf
from absl import flags, logging


@dataclasses.dataclass
class PipelineResult:
    """What a pipeline run left: as `subprocess.CompletedProcess` names it."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _flags_parsed_from(argv, module_name):
    """Within the block the process' flags hold `argv` over their defaults, as a new
    process would parse them; yields what is left of `argv`. Before and after, every
    flag is back at its default and unparsed, so no value leaks between runs.

    Flags that another pipeline module defines for itself (`pipelines.serve`'s required
    --model_name) are not that pipeline's: their validators are set aside meanwhile, as
    a process running `module_name` would never have defined them.
    """
    others = [
        flag
        for name, defined in flags.FLAGS.flags_by_module_dict().items()
        if name.startswith("pipelines.")
        and not name.startswith("pipelines.flags.")
        and name != module_name
        for flag in defined
    ]
    validators = [(flag, flag.validators) for flag in others]
    for flag in others:
        flag.validators = []
    flags.FLAGS.unparse_flags()
    try:
        yield flags.FLAGS(argv)
    finally:
        flags.FLAGS.unparse_flags()
        for flag, kept in validators:
            flag.validators = kept


@contextlib.contextmanager
def _standard_streams(stdin):
    """stdin holding `stdin` (text or bytes), stdout and stderr captured."""
    data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin or b"")
    streams = (sys.stdin, sys.stdout, sys.stderr)
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    captured = (sys.stdout, sys.stderr)
    try:
        yield captured
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams


@contextlib.contextmanager
def _process_state_restored():
    """The global state a pipeline sets for its process (Keras' dtype policy, sys.argv,
    absl's verbosity) is put back after the run."""
    policy, argv = keras.config.dtype_policy(), sys.argv
    verbosity = logging.get_absl_logger().level
    try:
        yield
    finally:
        keras.config.set_dtype_policy(policy)
        sys.argv = argv
        logging.get_absl_logger().setLevel(verbosity)


def run_pipeline(name, arguments=(), stdin=None):
    """Runs `pipelines.NAME` with `arguments` in this process; returns a `PipelineResult`.

    Args:
        name: The pipeline's module name under `pipelines` (`"translate"`).
        arguments: Its command-line arguments.
        stdin: Text or bytes the pipeline reads from stdin.
    """
    from pipelines import cli

    module = importlib.import_module(f"pipelines.{name}")
    # TensorFlow runs before the pipeline does, so that a pipeline's process-wide thread
    # settings (which only take effect before the first operation) stay the process'.
    tf.constant(0).numpy()
    argv = [f"{name}.py", *arguments]
    returncode = 0
    with _process_state_restored(), _standard_streams(stdin) as (stdout, stderr):
        sys.argv = argv
        try:
            with _flags_parsed_from(argv, module.__name__) as remaining:
                if not flags.FLAGS["verbosity"].present:
                    logging.set_verbosity(logging.WARNING)
                try:
                    module.main(remaining)
                except cli.user_errors() as error:
                    cli.fail(error)
        except flags.Error as error:
            print(f"{name}: error: {cli.one_line(error)}", file=sys.stderr)
            returncode = cli.USER_ERROR_EXIT_CODE
        except SystemExit as exit_:
            returncode = exit_.code if isinstance(exit_.code, int) else 1
        return PipelineResult(returncode, stdout.getvalue(), stderr.getvalue())


def run_in_process(arguments, stdin=None, check=True, timeout=None):
    """`helpers.subprocesses.run_python` for a pipeline, run in this process:
    `arguments` are `["-m", "pipelines.NAME", *flags]`; asserts the run succeeded
    (showing the end of its stderr) unless `check` is False. `timeout` is accepted for
    the same call sites and ignored (the suite's own timeout applies)."""
    del timeout
    if arguments[0] == "-m":
        arguments = arguments[1:]
    module, *flags_ = arguments
    prefix = "pipelines."
    if not module.startswith(prefix):
        raise ValueError(f"{module} is not a pipeline; run it with run_python.")
    result = run_pipeline(module[len(prefix) :], flags_, stdin)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result
