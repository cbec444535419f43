"""The flags of pipelines.build_shortlist (besides --model_dir)."""

from absl import flags

from pipelines.flags.groups import FLAGS, SHORTLIST, flag_group

# The sizes chosen on the validation set (docs/experiments.md, vocabulary selection).
DEFAULT_TOP_K = 10
DEFAULT_FREQUENT = 100


@flag_group(SHORTLIST)
def define_shortlist_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines what pipelines.build_shortlist learns its table from and what it keeps."""
    if "shortlist_top_k" in flag_values:
        return
    flags.DEFINE_integer(
        "shortlist_top_k",
        DEFAULT_TOP_K,
        "pipelines.build_shortlist: target pieces kept per source piece (by IBM model 1 "
        "probability).",
        lower_bound=1,
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "shortlist_frequent",
        DEFAULT_FREQUENT,
        "pipelines.build_shortlist: most frequent target pieces every batch decodes against.",
        lower_bound=0,
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "shortlist_source",
        None,
        "pipelines.build_shortlist: source side of the parallel text to learn from "
        "(default: the run's prepared training text; needed for an imported run).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "shortlist_target",
        None,
        "pipelines.build_shortlist: target side of that text, line for line.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "shortlist_max_pairs",
        1_000_000,
        "pipelines.build_shortlist: learn from at most this many pairs (the first ones).",
        lower_bound=1,
        flag_values=flag_values,
    )
