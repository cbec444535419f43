"""The flags of pipelines.average_checkpoints (besides --model_dir and --output_dir)."""

from absl import flags

from pipelines.flags.groups import AVERAGE, FLAGS, flag_group


@flag_group(AVERAGE)
def define_average_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines which checkpoints pipelines.average_checkpoints averages."""
    if "last" in flag_values:
        return
    flags.DEFINE_integer(
        "last",
        0,
        "pipelines.average_checkpoints: average the N newest checkpoints of --model_dir's "
        "checkpoints/ (at most the --keep_checkpoints training kept).",
        flag_values=flag_values,
    )
    flags.DEFINE_list(
        "checkpoints",
        [],
        "pipelines.average_checkpoints: average these checkpoints (comma-separated "
        "prefixes, e.g. RUN/checkpoints/ckpt-900) instead of --last.",
        flag_values=flag_values,
    )
