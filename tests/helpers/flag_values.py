"""Every pipeline flag parsed into a fresh `FlagValues`, for in-process flag tests."""

from absl import flags

from pipelines import flags as pipeline_flags


def parsed_flags(*arguments):
    """Returns a new `FlagValues` with every pipeline flag defined and `arguments` parsed."""
    flag_values = flags.FlagValues()
    pipeline_flags.define_all_flags(flag_values)
    flag_values(["test", *arguments])
    return flag_values
