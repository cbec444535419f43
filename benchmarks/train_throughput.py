"""Training throughput in target tokens per second on Multi30k.

    python -m benchmarks.train_throughput [--preset=iwslt_de_en] [--max_tokens=4000] \
        [--steps=0] [--variants=float32,xla,bfloat16] [--config=configs/multi30k_en_de.cfg]

(`--preset=config`: the model of --config, its preset with the config's overrides.
`benchmarks.compare_fairseq_training` runs this measurement beside fairseq's.)

Uses the real input pipeline and the real training step (forward, loss, backward,
all-reduce, clipping, Nesterov update) of `convs2s_tf.training.Trainer`, on the prepared
data of --config (Multi30k en-de by default; prepared first if needed, read from its
shards as a run reads them), in the steady state of a run's second and later epochs:
one untimed epoch first (every batch shape traced, compiled and seen by oneDNN once),
then a timed one (or `--steps` steps of it). Batches vary in size (each length bucket ends
an epoch with a partial batch), so only whole epochs give a training run's rate. Each
variant runs in a fresh process (the mixed-precision policy is global): float32 graph,
float32 with the step XLA-compiled, and bfloat16 mixed precision. Ends with one JSON line.
"""

import json
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from benchmarks.config_models import (
    CONFIG_MODEL,
    FLAGFILE,
    ROOT,
    data_dir,
    model_config,
    throughput_command,
)

flags.DEFINE_string(
    "preset",
    "iwslt_de_en",
    f"Architecture preset to train, or {CONFIG_MODEL!r}: the model of "
    "configs/multi30k_en_de.cfg (its preset and the config's overrides).",
)
flags.DEFINE_integer("max_tokens", 4000, "Token budget per batch (the authors' recipe: 4000).")
flags.DEFINE_integer(
    "steps", 0, "Timed training steps per variant (0: one whole epoch, a run's true rate)."
)
flags.DEFINE_list("variants", ["float32", "xla", "bfloat16"], "Variants to measure.")
flags.DEFINE_string(
    "config",
    FLAGFILE,
    f"Pipeline flagfile naming the data (its --data_dir, prepared first if needed) and "
    f"--preset={CONFIG_MODEL}'s model.",
)
flags.DEFINE_string("variant", None, "Internal: measure one variant in this process.")
flags.DEFINE_string(
    "profile_dir", None, "Internal: TensorFlow's profiler traces the timed steps into it."
)
FLAGS = flags.FLAGS


def measure(variant):
    """Runs warm-up then timed steps of one variant; returns target tokens/s."""
    import tensorflow as tf

    from convs2s_tf.data.pipeline import TrainingData
    from convs2s_tf.data.prepare import PreparedData
    from convs2s_tf.models.families import build_model
    from convs2s_tf.training import Trainer, TrainingConfig, create_strategy

    prepared = PreparedData.load(data_dir(FLAGS.config))
    training_data = TrainingData(
        prepared.shard_paths("train"), prepared.length_index("train"), max_tokens=FLAGS.max_tokens
    )
    model = model_config(FLAGS.preset, prepared.summary["vocab_size"], FLAGS.config)
    config = TrainingConfig(
        dtype="bfloat16" if variant == "bfloat16" else "float32",
        xla=variant == "xla",
        progress_bar=False,
    )
    trainer = Trainer(
        lambda: build_model(model),
        config,
        tempfile.mkdtemp(),
        create_strategy("mirrored"),
    )
    distributed = trainer.strategy.distribute_datasets_from_function(
        lambda context: training_data.dataset(context)
    )
    trainer._build_steps(distributed.element_spec)
    steps_per_epoch = training_data.steps_per_epoch(trainer.placement)
    iterator = iter(distributed)
    # The untimed first epoch: as a run's first, it meets every batch shape once
    # (tracing, XLA compilation of the loss, oneDNN primitives).
    for _ in range(steps_per_epoch):
        trainer._train_step(next(iterator))
    steps = FLAGS.steps or steps_per_epoch
    tokens = 0.0
    if FLAGS.profile_dir:
        tf.profiler.experimental.start(FLAGS.profile_dir)
    start = time.perf_counter()
    for _ in range(steps):
        tokens += float(trainer._train_step(next(iterator))["tokens"])
    seconds = time.perf_counter() - start
    if FLAGS.profile_dir:
        tf.profiler.experimental.stop()
    return {
        "target_tokens_per_sec": tokens / seconds,
        "target_tokens": tokens,
        "parameters": int(sum(v.shape.num_elements() for v in trainer.model.trainable_variables)),
        "steps": steps,
        "steps_per_epoch": steps_per_epoch,
        "seconds": seconds,
        "tf": tf.__version__,
    }


def main(argv):
    del argv
    if FLAGS.variant:
        print(json.dumps(measure(FLAGS.variant)))
        return
    # Prepare the data once (no-op when up to date).
    subprocess.run(
        [sys.executable, "-m", "pipelines.prepare_data", f"--flagfile={FLAGS.config}"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    results = {}
    for variant in FLAGS.variants:
        output = subprocess.run(
            throughput_command(variant, FLAGS.preset, FLAGS.max_tokens, FLAGS.steps, FLAGS.config),
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        figures = json.loads(output.stdout.strip().splitlines()[-1])
        results[variant] = round(figures["target_tokens_per_sec"])
        print(
            f"{FLAGS.preset} {variant}: {results[variant]:,} target tokens/s "
            f"({figures['steps']} steps in {figures['seconds']:.1f} s, "
            f"max_tokens {FLAGS.max_tokens})",
            flush=True,
        )
    best = max(results.values())
    print(
        json.dumps(
            {
                "target_tokens_per_sec": best,
                **{f"target_tokens_per_sec_{name}": value for name, value in results.items()},
                "preset": FLAGS.preset,
                "max_tokens": FLAGS.max_tokens,
                "steps": FLAGS.steps,
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
