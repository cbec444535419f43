"""The flag groups' registry: every pipeline defines all groups and shows its own.

Every pipeline defines every flag, so that one flagfile (configs/*.cfg) serves them all
(absl stops at an unknown flag in a flagfile), and declares the groups it reads as its
key flags (`declare_key_flags`): its --help lists exactly those, --helpfull every flag.
"""

import functools
import sys

from absl import flags

FLAGS = flags.FLAGS

# Flag groups.
DATA = "data"
PREPARE = "prepare"
BATCHING = "batching"
MODEL = "model"
RUN = "run"
TRAINING = "training"
CHECKPOINT = "checkpoint"
INFERENCE = "inference"
SEARCH = "search"
TRANSLATE = "translate"
EVALUATE = "evaluate"
EXPORT = "export"
IMPORT = "import"
AVERAGE = "average"
SHORTLIST = "shortlist"
DISTILL = "distill"

# Group name -> the function defining its flags, in definition order.
_GROUPS = {}


def flag_group(name):
    """Registers the decorated function as the definition of flag group `name`."""

    def register(define):
        _GROUPS[name] = define
        return define

    return register


def define_all_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines every flag of every pipeline (so one flagfile serves all of them)."""
    for define in _GROUPS.values():
        define(flag_values)


@functools.cache
def group_flags(group: str) -> tuple[str, ...]:
    """The names of the flags of `group` (one of DATA, PREPARE, ...), in definition order."""
    flag_values = flags.FlagValues()
    _GROUPS[group](flag_values)
    return tuple(flag_values)


_VERBOSITY_HELP = (
    "Logging verbosity: -1 (the pipelines' default) shows warnings and errors only, 0 adds "
    "INFO logs and, given on the command line, TensorFlow's start-up messages; 1 DEBUG."
)


def declare_key_flags(
    *groups: str, also: tuple[str, ...] = (), flag_values: flags.FlagValues = FLAGS
) -> None:
    """Defines every flag, and declares the flags the calling pipeline reads as its key
    flags: the ones its --help lists (--helpfull lists all).

    Args:
        *groups: The flag groups the pipeline reads (DATA, MODEL, SEARCH, ...).
        also: Single flags it reads from other groups (e.g. evaluate's --data_dir).
        flag_values: Where the flags are defined.
    """
    define_all_flags(flag_values)
    caller = sys._getframe(1).f_globals["__name__"]
    # absl files the main module's key flags under sys.argv[0], where --help looks them
    # up (FlagValues.main_module_help).
    module_name = sys.argv[0] if caller == "__main__" else caller
    names = [name for group in groups for name in group_flags(group)] + list(also)
    if "verbosity" in flag_values:
        # Every pipeline honours it (pipelines.cli, pipelines.console); absl's own help
        # describes app.run's INFO default, which the pipelines lower to WARNING.
        flag_values["verbosity"].help = _VERBOSITY_HELP
        names.append("verbosity")
    for name in names:
        flag_values.register_key_flag_for_module(module_name, flag_values[name])
