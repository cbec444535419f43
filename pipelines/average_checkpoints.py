"""Averages checkpoints' weights into a new run directory, as fairseq's
scripts/average_checkpoints.py.

    python -m pipelines.average_checkpoints --model_dir=runs/multi30k_en_de --last=3 \\
        --output_dir=runs/multi30k_en_de_avg3
    python -m pipelines.average_checkpoints --model_dir=runs/multi30k_en_de \\
        --checkpoints=runs/multi30k_en_de/checkpoints/ckpt-900,... --output_dir=...

Writes OUTPUT_DIR/config.json (--model_dir's, plus "averaged_from": the checkpoints
averaged) and OUTPUT_DIR/best/, the element-wise mean of the checkpoints' model weights
(float32; the optimiser and training state are not averaged, nor kept). Use OUTPUT_DIR as
--model_dir of translate, evaluate and export.
"""

from absl import app, flags

from pipelines import cli
from pipelines import flags as pipeline_flags

FLAGS = flags.FLAGS
pipeline_flags.declare_key_flags(pipeline_flags.RUN, pipeline_flags.AVERAGE, also=("output_dir",))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    for name in ("model_dir", "output_dir"):
        if not FLAGS[name].value:
            raise app.UsageError(f"--{name} is required.")
    if bool(FLAGS.last) == bool(FLAGS.checkpoints):
        raise app.UsageError("Give either --last=N or --checkpoints=A,B,...")
    from convs2s_tf.runs import RunDirectory
    from convs2s_tf.runs.averaging import last_checkpoints, write_averaged_run

    paths = FLAGS.checkpoints
    # Checkpoint and run problems are reported by pipelines.cli in one line; a count or
    # an output directory that cannot work is a usage error.
    try:
        if not paths:
            run = RunDirectory(FLAGS.model_dir)
            paths = last_checkpoints(run.recent_checkpoints(), FLAGS.last, run.checkpoints_dir)
        written = write_averaged_run(FLAGS.model_dir, paths, FLAGS.output_dir)
    except ValueError as error:
        raise app.UsageError(str(error)) from error
    print(f"Averaged {len(paths)} checkpoints into {written}")
    return 0


if __name__ == "__main__":
    cli.run(main)
