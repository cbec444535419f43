"""A quiet console for the pipelines: what a user needs by default, the rest on request.

By default a pipeline shows its own output (progress bar, per-epoch lines, results) and
real warnings and errors. TensorFlow's start-up notices (oneDNN, "Could not find cuda
drivers", "failed call to cuInit" on a CPU-only machine) and INFO logs of the library
and tfds come back with absl's `--verbosity=0` (INFO; 1 for DEBUG).

TensorFlow's C++ logging reads TF_CPP_MIN_LOG_LEVEL once, when it is first imported, so
`configure_tensorflow_logging` runs from `pipelines/__init__.py`, before any pipeline
imports TensorFlow, and looks for --verbosity on the command line itself (a --verbosity
given in a flagfile sets the Python logs only).

Importing TensorFlow imports all of Keras, and Keras imports scikit-learn, matplotlib's
pyplot and IPython if they are installed, for features no pipeline uses (its scikit-learn
wrappers, image galleries, notebook detection): about a third of TensorFlow's import
time (docs/performance.md). `import_tensorflow` hides them while TensorFlow imports
(Keras treats each as absent); they stay importable afterwards.
"""

import importlib
import os
import re
import sys
import tempfile

# absl's -v/--verbosity: -1 WARNING (the pipelines' default), 0 INFO, 1 DEBUG.
_VERBOSITY_NAMES = ("--verbosity", "-verbosity", "--v", "-v")
# TF_CPP_MIN_LOG_LEVEL of a quiet console: 3 hides C++ ERROR lines too, since on a
# CPU-only machine TensorFlow logs "failed call to cuInit" at ERROR level; errors that
# matter reach Python as exceptions carrying the same message.
QUIET_TF_CPP_MIN_LOG_LEVEL = "3"
_SEVERITIES = "IWEF"  # C++ log line prefixes: INFO, WARNING, ERROR, FATAL (levels 0-3).
_LOG_LINE = re.compile(r"^([IWEF])\d{4} ")
# Printed by absl's C++ logging for lines logged before TensorFlow sets its level.
_PREINIT_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called"
# What Keras imports on import inside `try: ... except ImportError:` for features the
# pipelines never use.
KERAS_OPTIONAL_IMPORTS = ("sklearn", "matplotlib", "IPython")


def requested_verbosity(argv):
    """The -v/--verbosity value on the command line `argv`, or None when absent.

    An unparsable value counts as absent here: absl reports it when it parses the flags.
    """
    value = None
    arguments = iter(argv)
    for argument in arguments:
        if argument == "--":
            break
        name, has_value, text = argument.partition("=")
        if name not in _VERBOSITY_NAMES:
            continue
        if not has_value:
            text = next(arguments, "")
        try:
            value = int(text)
        except ValueError:
            pass
    return value


def configure_tensorflow_logging(argv=None):
    """Sets TF_CPP_MIN_LOG_LEVEL (unless the environment sets it) and imports TensorFlow
    with the C++ lines it logs before reading that level filtered by it.

    Args:
        argv: The command line (default `sys.argv`); --verbosity >= 0 keeps every line.
    """
    argv = sys.argv[1:] if argv is None else argv
    verbosity = requested_verbosity(argv)
    # A user's own setting wins.
    os.environ.setdefault(
        "TF_CPP_MIN_LOG_LEVEL",
        "0" if verbosity is not None and verbosity >= 0 else QUIET_TF_CPP_MIN_LOG_LEVEL,
    )
    _import_tensorflow_filtered(_min_log_level())


def _min_log_level():
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def import_tensorflow(hidden=KERAS_OPTIONAL_IMPORTS):
    """Imports TensorFlow with the modules `hidden` (those not imported yet) unavailable
    while it imports, then available again.

    Keras, which TensorFlow imports, then runs without them: its scikit-learn wrappers
    and `keras.visualization` report them missing in this process, nothing else changes.
    Should a TensorFlow version need one of them, the import is repeated without hiding.

    Returns:
        The `tensorflow` module.
    """
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    # A None entry makes `import name` raise ImportError (as for a missing package).
    hidden = [name for name in hidden if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None
    try:
        return importlib.import_module("tensorflow")
    except ImportError as error:
        if (error.name or "").split(".")[0] not in hidden:
            raise
    finally:
        for name in hidden:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]
    return importlib.import_module("tensorflow")


def _import_tensorflow_filtered(min_level):
    if "tensorflow" in sys.modules or min_level <= 0:
        import_tensorflow()
        return
    # TensorFlow's shared libraries log their first lines (oneDNN, CUDA drivers) to file
    # descriptor 2 before TF_CPP_MIN_LOG_LEVEL takes effect, so the import runs with
    # descriptor 2 captured and the lines below the level are dropped afterwards.
    try:
        sys.stderr.flush()
        saved_stderr = os.dup(2)
    except (AttributeError, OSError, ValueError):
        import_tensorflow()
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import_tensorflow()
        finally:
            sys.stderr.flush()
            os.dup2(saved_stderr, 2)
            os.close(saved_stderr)
            captured.seek(0)
            text = captured.read().decode("utf-8", errors="replace")
            # Everything else (Python warnings, a failed import's output) is replayed.
            sys.stderr.write(filter_log_lines(text, min_level))
            sys.stderr.flush()


def filter_log_lines(text, min_level):
    """`text` without the C++ log lines below `min_level` (0 INFO ... 3 FATAL) and absl's
    pre-initialisation notice.

    Only lines with a log prefix ("I0521 ...") are judged: any other line (a Python
    warning, a message's continuation) is kept, since it cannot be told apart safely.
    """
    kept = []
    for line in text.splitlines(keepends=True):
        match = _LOG_LINE.match(line)
        if line.startswith(_PREINIT_NOTICE):
            continue
        if match and _SEVERITIES.index(match.group(1)) < min_level:
            continue
        kept.append(line)
    return "".join(kept)
