"""The models and training settings the training benchmarks use, as the pipelines' own
flags make them from a flagfile (not from the command line: no global flags here)."""

import os
import sys

from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGFILE = os.path.join(ROOT, "configs", "multi30k_en_de.cfg")
# The model name that means "the model of FLAGFILE" (its preset with its overrides).
CONFIG_MODEL = "config"


def config_flags(*arguments):
    """Every pipeline flag, parsed from `arguments` alone (e.g. `--flagfile=...`)."""
    from pipelines.flags import define_all_flags

    flag_values = flags.FlagValues()
    define_all_flags(flag_values)
    flag_values(["config_models", *arguments])
    return flag_values


def model_config(name, vocab_size, flagfile=FLAGFILE):
    """The `ConvS2S` arguments of model `name`: `CONFIG_MODEL` is `flagfile`'s model (e.g.
    multi30k_cpu with the shared output projection), any other name a preset as it is."""
    from pipelines.flags.model import model_config_from_flags

    chosen = f"--flagfile={flagfile}" if name == CONFIG_MODEL else f"--preset={name}"
    return model_config_from_flags(vocab_size, config_flags(chosen))


def data_dir(flagfile=FLAGFILE):
    """`flagfile`'s prepared data directory (a relative one from the repository root)."""
    return os.path.join(ROOT, config_flags(f"--flagfile={flagfile}")["data_dir"].value)


def training_config():
    """FLAGFILE's `TrainingConfig` (optimiser, clipping, label smoothing, dtype, ...)."""
    from pipelines.flags.training import training_config_from_flags

    return training_config_from_flags(config_flags(f"--flagfile={FLAGFILE}"))


def throughput_command(variant, preset, max_tokens, steps, config, profile_dir=None):
    """The command measuring one `variant` of `benchmarks.train_throughput` in a fresh
    process (a variant's mixed-precision policy is global); its last stdout line is the
    variant's figures as JSON."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.train_throughput",
        f"--variant={variant}",
        f"--preset={preset}",
        f"--max_tokens={max_tokens}",
        f"--steps={steps}",
        f"--config={config}",
    ]
    if profile_dir:
        command.append(f"--profile_dir={profile_dir}")
    return command
