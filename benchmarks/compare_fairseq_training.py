"""Training speed against the authors' implementation, fairseq-train: same models, same
data, same machine, one run.

    python -m benchmarks.compare_fairseq_training [--models=config,iwslt_de_en] \\
        [--dtypes=float32,bfloat16] [--max_tokens=4000] [--steps=100] [--work_dir=DIR]

On the prepared Multi30k en-de data of configs/multi30k_en_de.cfg (prepared first if
needed) and its SentencePiece BPE, each model of --models (`config`: the config's own
model, multi30k_cpu with the shared output projection; any other name a preset as it is)
trains on both systems, in the steady state, start-up and warm-up left out:

* this project: `benchmarks.train_throughput`'s measurement in a fresh process per
  compute dtype of --dtypes (the Trainer's real input pipeline and training step): one
  untimed epoch (every batch shape traced), then the first --steps updates of the next
  (0: the whole epoch) timed;
* fairseq: `fairseq-train` (`python -m fairseq_cli.train`, --cpu, PyTorch on
  --fairseq_threads threads, its own batching and data loader) on the training split
  written as SentencePiece pieces and binarised by fairseq-preprocess with the
  SentencePiece vocabulary as its dictionary (the same ids: the same tokens in both); the
  model's fairseq architecture with every `fconv` option spelled out (dropout, shared
  output projection, ...); the config's optimiser (NAG, momentum, rate, clip norm,
  label-smoothed cross-entropy); the same --max_tokens; float32 (fairseq's CPU mode); no
  validation, no checkpoints. Its rate is its own figure (`wps`: target tokens over wall
  time) over the --steps updates after its first --fairseq_warmup_updates (its
  `train_inner` lines), or with --steps=0 over its whole second epoch (its epoch summary).

Target tokens are the non-pad target tokens, end-of-sentence included, in both (the
models' parameter counts are printed beside them). Batches are shuffled on both sides, so
100 updates (three quarters of an epoch) sample the epoch's mix of lengths; the defaults
take about 11 minutes on 2 cores, --steps=0 about 16. The table gives each rate and the
ratio (> 1: this project is faster) and names the CPU; the last line is JSON. Run it alone
on the machine (each side takes the cores it finds), from a clone nobody edits meanwhile.
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile

from absl import app, flags

from benchmarks import comparison_report, fairseq_commands, fairseq_training
from benchmarks.config_models import CONFIG_MODEL, FLAGFILE, ROOT, model_config, training_config

DATA_DIR = os.path.join(ROOT, "data", "multi30k_en_de")

flags.DEFINE_list(
    "models",
    [CONFIG_MODEL, "iwslt_de_en"],
    f"Models to train: {CONFIG_MODEL!r} (configs/multi30k_en_de.cfg's) or preset names.",
)
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "This project's compute dtypes.")
flags.DEFINE_integer("max_tokens", 4000, "Token budget per batch, both systems.")
flags.DEFINE_integer(
    "steps", 100, "Timed updates per measurement (0: the whole second epoch on each side)."
)
flags.DEFINE_integer(
    "fairseq_warmup_updates",
    30,
    "With --steps: fairseq's untimed updates first (a multiple of --fairseq_log_interval).",
)
flags.DEFINE_integer("fairseq_log_interval", 10, "fairseq's --log-interval.")
flags.DEFINE_integer("fairseq_threads", os.cpu_count() or 1, "PyTorch's threads in fairseq.")
flags.DEFINE_string("work_dir", None, "Keep fairseq's data here (default: temporary).")
FLAGS = flags.FLAGS


def measure_project(model, dtype, steps):
    """`benchmarks.train_throughput`'s measurement of `model` in `dtype`, in a new process."""
    _, stdout, _ = fairseq_commands.run_timed(
        [
            sys.executable,
            "-m",
            "benchmarks.train_throughput",
            f"--variant={dtype}",
            f"--preset={model}",
            f"--max_tokens={FLAGS.max_tokens}",
            f"--steps={steps}",
        ],
        ROOT,
        dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    return json.loads(stdout.strip().splitlines()[-1])


def main(argv):
    del argv
    import torch

    from convs2s_tf.data.data_directory import PreparedData

    if FLAGS.steps and FLAGS.fairseq_warmup_updates % FLAGS.fairseq_log_interval:
        raise app.UsageError("--fairseq_warmup_updates must be a multiple of the log interval.")
    subprocess.run(
        [sys.executable, "-m", "pipelines.prepare_data", f"--flagfile={FLAGFILE}"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    prepared = PreparedData.load(DATA_DIR)
    training = training_config()
    cpu = comparison_report.cpu_description()
    timed = f"{FLAGS.steps} updates" if FLAGS.steps else "the second epoch"
    print(
        f"CPU: {cpu}. Training split of {DATA_DIR} (SentencePiece BPE), "
        f"{FLAGS.max_tokens}-token batches, {timed} timed on each side; "
        f"PyTorch {torch.__version__} on {FLAGS.fairseq_threads} threads.",
        flush=True,
    )
    results = {}
    with tempfile.TemporaryDirectory() as temporary:
        work_dir = FLAGS.work_dir or temporary
        os.makedirs(work_dir, exist_ok=True)
        languages = (prepared.source_lang, prepared.target_lang)
        data_bin, vocab_size = fairseq_training.write_data(prepared, work_dir)
        for model in FLAGS.models:
            config = model_config(model, vocab_size)
            arguments = fairseq_training.model_arguments(config)
            figures = fairseq_training.train(
                data_bin,
                languages,
                arguments + fairseq_training.training_arguments(training, FLAGS.max_tokens),
                FLAGS.fairseq_threads,
                work_dir,
                FLAGS.steps,
                FLAGS.fairseq_warmup_updates,
                FLAGS.fairseq_log_interval,
            )
            figures["architecture"] = fairseq_training.architecture(config)
            measured = {"fairseq": figures}
            print(
                f"{model} fairseq-train: {figures['target_tokens_per_sec']:,.0f} target "
                f"tokens/s ({figures['wall_seconds']:.0f} s in all): "
                + shlex.join(["python", *figures.pop("command")[1:]]),
                flush=True,
            )
            for dtype in FLAGS.dtypes:
                measured[dtype] = measure_project(model, dtype, FLAGS.steps)
                print(
                    f"{model} this project {dtype}: "
                    f"{measured[dtype]['target_tokens_per_sec']:,.0f} target tokens/s",
                    flush=True,
                )
            results[model] = measured
    print(fairseq_training.table(results, cpu))
    line = fairseq_training.summary(results, cpu)
    settings = dict(
        max_tokens=FLAGS.max_tokens,
        steps=FLAGS.steps,
        fairseq_warmup_updates=FLAGS.fairseq_warmup_updates if FLAGS.steps else None,
        fairseq_threads=FLAGS.fairseq_threads,
        torch=torch.__version__,
    )
    print(json.dumps(dict(line, **settings)))


if __name__ == "__main__":
    app.run(main)
