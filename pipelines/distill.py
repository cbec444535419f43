"""Sequence-level knowledge distillation: a teacher translates its training source, and
its translations become the targets of a new prepared data directory.

    python -m pipelines.distill --model_dir=runs/multi30k_en_de \\
        --output_data_dir=data/multi30k_en_de_distilled [--beam_size=5 --batch_size=64] \\
        [--keep_original_targets] [--chunk_size=2000] [--worker_index=0 --num_workers=1]
    python -m pipelines.train --flagfile=configs/multi30k_en_de.cfg \\
        --flagfile=data/multi30k_en_de_distilled/distillation/data.cfg \\
        --model_dir=runs/multi30k_en_de_student    # the student

The teacher (--model_dir: a run, an averaged run, or several runs comma-separated, an
ensemble) translates the training source of the prepared data it was trained on, with
beam search, in chunks of --chunk_size lines, each written whole as soon as it is done;
a re-run resumes at the first unwritten chunk, and refuses a teacher, search or chunk
size other than the one it resumes. With --num_workers=N, worker i translates chunks i,
i + N, ...; the worker that finds every chunk written prepares --output_data_dir with the
teacher's SentencePiece model and the teacher data's validation and test splits, and
writes the data flags of that preparation as a flagfile (distillation/data.cfg): given
after a config's, it makes pipelines.train find the distilled data up to date.
"""

import os

from absl import app, flags

from pipelines import cli
from pipelines import flags as pipeline_flags
from pipelines.inference import search_config_from_flags, shortlist_from_flags, usage_errors

FLAGS = flags.FLAGS
# The flagfile of the distilled data's preparation, in the work directory.
DATA_FLAGFILE = "data.cfg"
pipeline_flags.declare_key_flags(
    pipeline_flags.RUN,
    pipeline_flags.SEARCH,
    pipeline_flags.DISTILL,
    also=("checkpoint", "batch_size", "workers", "progress_bar"),
)


class _ProgressBar:
    """A console progress bar over the sentences this worker translates."""

    def __init__(self):
        self._bar = None

    def __call__(self, done, total):
        if self._bar is None:
            import keras

            self._bar = keras.utils.Progbar(total, unit_name="sentence")
        self._bar.update(done)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.model_dir:
        raise app.UsageError("Missing required flag: --model_dir (the teacher's run).")
    if not FLAGS.output_data_dir:
        raise app.UsageError("Missing required flag: --output_data_dir.")
    if FLAGS.batch_size < 1:
        raise app.UsageError("--batch_size must be >= 1.")
    search_config = search_config_from_flags(with_nbest=False)
    from convs2s_tf.distillation import DistillationConfig, distill
    from convs2s_tf.inference.translator import search_one_batch_per_core

    config = DistillationConfig(
        model_dir=FLAGS.model_dir,
        output_data_dir=FLAGS.output_data_dir,
        checkpoint=FLAGS.checkpoint,
        search_config=search_config,
        shortlist=shortlist_from_flags(),
        batch_size=FLAGS.batch_size,
        chunk_size=FLAGS.chunk_size,
        worker_index=FLAGS.worker_index,
        num_workers=FLAGS.num_workers,
        keep_original_targets=FLAGS.keep_original_targets,
        prepare_workers=FLAGS.workers,
        in_flight=search_one_batch_per_core(),
    )
    # A missing teacher, unprepared teacher data and a resumed run with other settings
    # are reported by pipelines.cli in one line; so are searches the teacher cannot run.
    with usage_errors():
        result = distill(config, progress=_ProgressBar() if FLAGS.progress_bar else None)
    plan = result.plan
    written = plan.num_chunks - result.chunks_left
    print(
        f"{result.work_dir}: {written} of {plan.num_chunks} chunk(s) of {plan.chunk_size} "
        f"lines written, {result.chunks_translated} by this worker"
        + (" (resumed)" if result.resumed else "")
    )
    if result.prepared is None:
        print(
            f"{result.chunks_left} chunk(s) of other workers remain: the worker that "
            f"finishes last prepares {config.output_data_dir} (or run any worker again)."
        )
        return 0
    flagfile = _write_data_flagfile(result)
    summary = result.prepared.summary
    train = summary["splits"]["train"]
    print(
        f"{config.output_data_dir}: {train['pairs_kept']} training pairs of "
        f"{train['pairs_read']} kept, vocab {summary['vocab_size']} (the teacher's). Train a "
        f"student with python -m pipelines.train ... --flagfile={flagfile} --model_dir=..."
    )
    return 0


def _write_data_flagfile(result):
    """Writes the data flags of the distilled data (`DATA_FLAGFILE` in the work directory),
    which make pipelines.train find it up to date; returns its path."""
    path = os.path.join(result.work_dir, DATA_FLAGFILE)
    lines = [
        "# The distilled data: given after a config's flagfile, pipelines.train (and",
        "# pipelines.prepare_data) find it prepared (written by pipelines.distill).",
        *pipeline_flags.prepare_config_flags(result.prepare_config),
    ]
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)
    return path


if __name__ == "__main__":
    cli.run(main)
