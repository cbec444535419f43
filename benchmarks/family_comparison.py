"""ConvS2S against PoseNet for one seed: both arms trained one after the other on this
machine in their configs' budget, then scored and timed the same way.

    python -m benchmarks.family_comparison --seed=1 [--runs_dir=runs/family_comparison] \\
        [--arms=convs2s:configs/multi30k_en_de.cfg,posenet:configs/posenet_multi30k.cfg] \\
        [--nobuckets]

Each arm of --arms (`name:flagfile`), in order, alone on the machine:

1. `pipelines.train --flagfile=FLAGFILE --model_dir=RUNS_DIR/NAME_seedSEED --seed=SEED`,
   timed, its console kept in `RUNS_DIR/NAME_seedSEED.log` (an arm whose training
   finished before, as `RUNS_DIR/NAME_seedSEED.train.json` records, is scored again, not
   retrained);
2. `pipelines.evaluate` of the model the run ends with on the test split, beam 5:
   sacreBLEU BLEU and chrF, the lowercased `intl` BLEU, and tensor2tensor's approx BLEU
   (teacher-forced argmax on pieces, per batch, padded; and without padding);
3. `benchmarks.export_speed`: the default export in a fresh process, beam 5, the mean
   latency of the first --latency_sentences requests at batch 1 and the first pass's
   sentences/s at batch --batch_size.

With them: trainable parameters, updates reached (the run's last checkpoint), epochs, and
training target tokens/s (the median of the epochs' rates in the console). Prints a table
naming the CPU, then one JSON line. A seed's two arms belong to one session on one
machine: the CPU's speed differs between machines.
"""

import json
import os
import subprocess
import sys
import time

from absl import app, flags

from benchmarks import cpu_description
from convs2s_tf.models.posenet.comparison import (
    epoch_token_rates,
    format_arms_table,
    median_token_rate,
    trainable_parameters,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ARMS = ["convs2s:configs/multi30k_en_de.cfg", "posenet:configs/posenet_multi30k.cfg"]

flags.DEFINE_integer("seed", 1, "Training seed of both arms.")
flags.DEFINE_list("arms", DEFAULT_ARMS, "The arms, `name:flagfile`, trained in this order.")
flags.DEFINE_string(
    "runs_dir", os.path.join(ROOT, "runs", "family_comparison"), "Where the runs are written."
)
flags.DEFINE_integer("beam_size", 5, "Beam of the test score and of the speed measurements.")
flags.DEFINE_integer("latency_sentences", 100, "Requests of one sentence each (batch 1).")
flags.DEFINE_integer("batch_size", 128, "Sentences per request for throughput.")
flags.DEFINE_bool(
    "buckets",
    True,
    "Time exports with their compiled small-batch buckets, as the default export has them "
    "(--nobuckets: graph mode only, which loads several seconds sooner).",
)
FLAGS = flags.FLAGS


def _python(arguments, log_path=None):
    """Runs `python -m ARGUMENTS` from the repository root; returns its stdout (the
    console also goes to `log_path`). Fails with the end of its output."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")
    result = subprocess.run(
        [sys.executable, "-m", *arguments], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if log_path:
        with open(log_path, "w", encoding="utf-8") as f:
            f.write(result.stdout + result.stderr)
    if result.returncode != 0:
        raise RuntimeError(f"{arguments[0]} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return result.stdout


def _last_json(output):
    return json.loads(output.strip().splitlines()[-1])


def _parameters(model_dir):
    """Trainable parameters of the run's model (a shared table counted once)."""
    from convs2s_tf.runs.loading import build_model, read_run_config

    return trainable_parameters(build_model(read_run_config(model_dir)["model"]))


def _updates(model_dir):
    from convs2s_tf.runs import RunDirectory
    from convs2s_tf.runs.checkpoint_directory import checkpoint_step

    # Training's last checkpoint is its last update (it saves when it stops).
    latest = RunDirectory(model_dir).latest_checkpoint()
    return checkpoint_step(latest) if latest else 0


def train(flagfile, model_dir):
    """Trains one arm (unless it finished before); returns its training figures."""
    log_path, record_path = f"{model_dir}.log", f"{model_dir}.train.json"
    if os.path.exists(record_path):
        with open(record_path, encoding="utf-8") as f:
            seconds = json.load(f)["train_seconds"]
    else:
        start = time.perf_counter()
        _python(
            [
                "pipelines.train",
                f"--flagfile={flagfile}",
                f"--model_dir={model_dir}",
                f"--seed={FLAGS.seed}",
            ],
            log_path,
        )
        seconds = round(time.perf_counter() - start, 1)
        with open(record_path, "w", encoding="utf-8") as f:
            json.dump({"train_seconds": seconds}, f)
    with open(log_path, encoding="utf-8") as f:
        console = f.read()
    return {
        "flagfile": flagfile,
        "train_seconds": seconds,
        "parameters": _parameters(model_dir),
        "updates": _updates(model_dir),
        "epochs": len(epoch_token_rates(console)),
        "train_tokens_per_sec": median_token_rate(console),
    }


def score(model_dir):
    """Test BLEU, chrF and approx BLEU of the model the run ends with."""
    scores = _last_json(
        _python(
            [
                "pipelines.evaluate",
                f"--model_dir={model_dir}",
                "--split=test",
                f"--beam_size={FLAGS.beam_size}",
                "--approx_bleu",
                "--json",
            ]
        )
    )
    keys = ("bleu", "chrf", "bleu_lowercase_intl", "approx_bleu", "approx_bleu_unpadded")
    return {key: round(scores[key], 2) for key in keys}


def speed(model_dir):
    """Beam decoding speed of the run's default export in a fresh process."""
    measured = _last_json(
        _python(
            [
                "benchmarks.export_speed",
                f"--model_dir={model_dir}",
                f"--latency_sentences={FLAGS.latency_sentences}",
                f"--batch_size={FLAGS.batch_size}",
                *([] if FLAGS.buckets else ["--no_buckets"]),
            ]
        )
    )
    return {
        "batch1_ms": measured["latency_batch1_mean_ms"],
        f"batch{FLAGS.batch_size}_sentences_per_sec": measured[
            "throughput_first_pass_sentences_per_sec"
        ],
    }


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    runs_dir = os.path.abspath(FLAGS.runs_dir)
    os.makedirs(runs_dir, exist_ok=True)
    arms = {}
    for arm in FLAGS.arms:
        name, _, flagfile = arm.partition(":")
        if not name or not flagfile or not os.path.isfile(os.path.join(ROOT, flagfile)):
            raise app.UsageError(f"--arms takes name:flagfile with an existing file; got {arm!r}.")
        model_dir = os.path.join(runs_dir, f"{name}_seed{FLAGS.seed}")
        print(f"{name}: training {flagfile} into {model_dir}", flush=True)
        arms[name] = train(flagfile, model_dir)
        arms[name].update(score(model_dir))
        arms[name].update(speed(model_dir))
        print(f"{name}: {json.dumps(arms[name])}", flush=True)
    cpu = cpu_description()
    print(f"\nseed {FLAGS.seed}, {cpu}\n{format_arms_table(arms)}")
    print(json.dumps({"seed": FLAGS.seed, "cpu": cpu, "arms": arms}))
    return 0


if __name__ == "__main__":
    app.run(main)
