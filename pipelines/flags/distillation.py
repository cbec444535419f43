"""The flags of pipelines.distill (besides the teacher's run, checkpoint and search)."""

from absl import flags

from convs2s_tf.distillation import CHUNK_SIZE
from pipelines.flags.groups import DISTILL, FLAGS, flag_group


@flag_group(DISTILL)
def define_distill_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines where pipelines.distill writes, how it cuts its work and shares it."""
    if "output_data_dir" in flag_values:
        return
    flags.DEFINE_string(
        "output_data_dir",
        None,
        "pipelines.distill: the prepared data directory to write (the teacher's source "
        "lines, its translations as targets); its distillation/ subdirectory keeps the "
        "work. Train a student on it with pipelines.train --data_dir=...",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "chunk_size",
        CHUNK_SIZE,
        "pipelines.distill: source lines per chunk file, the unit of resuming and of "
        "sharing the work between workers.",
        lower_bound=1,
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "keep_original_targets",
        False,
        "pipelines.distill: keep the original training pairs beside the distilled ones.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "worker_index",
        0,
        "pipelines.distill: this worker's number, from 0 to --num_workers - 1; it "
        "translates chunks worker_index, worker_index + num_workers, ...",
        lower_bound=0,
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "num_workers",
        1,
        "pipelines.distill: processes (on one or several machines, sharing "
        "--output_data_dir) that share the chunks.",
        lower_bound=1,
        flag_values=flag_values,
    )
