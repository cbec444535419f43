"""Training speed in target tokens per second, on the prepared data of a config.

    python -m benchmarks.train_speed [--preset=iwslt_de_en] [--max_tokens=4000] \\
        [--steps=0] [--variants=float32,xla,bfloat16] [--config=configs/multi30k_en_de.cfg] \\
        [--profile_dir=DIR]

The real input pipeline and training step of `convs2s_tf.training.Trainer` (its public
`build_steps` and `train_step`) on --config's data (prepared first if needed), in a run's
steady state: one untimed epoch (every batch shape traced and compiled), then a timed one
(or its first --steps steps; batches vary in size, so only whole epochs give a run's
rate). Each variant runs in a fresh process (the mixed-precision policy is global):
float32, float32 with the step XLA-compiled, bfloat16. `--preset=config` is --config's
own model; --profile_dir writes TensorBoard profiles of the timed steps; run under
`ONEDNN_MAX_CPU_ISA=AVX512_CORE` (or another oneDNN ISA) to see what a CPU feature is worth.
Ends with one JSON line.
"""

import json
import os
import tempfile
import time

from absl import app, flags

from benchmarks import (
    CONFIG_MODEL,
    FLAGFILE,
    last_json,
    main,
    model_config,
    prepared_data,
    python,
    run_timed,
)

VARIANTS = ("float32", "xla", "bfloat16")


def define_flags(flag_values=flags.FLAGS):
    define = {"flag_values": flag_values}
    preset = f"Preset to train, or {CONFIG_MODEL!r}: --config's model (its preset, overrides)."
    flags.DEFINE_string("preset", "iwslt_de_en", preset, **define)
    flags.DEFINE_integer("max_tokens", 4000, "Token budget per batch (the authors').", **define)
    flags.DEFINE_integer("steps", 0, "Timed steps per variant (0: a whole epoch).", **define)
    flags.DEFINE_list("variants", list(VARIANTS), f"Variants, of {VARIANTS}.", **define)
    config = f"Flagfile of the data (prepared first if needed) and --preset={CONFIG_MODEL}."
    flags.DEFINE_string("config", FLAGFILE, config, **define)
    flags.DEFINE_string("profile_dir", None, "Profile the timed steps into DIR/VARIANT.", **define)
    flags.DEFINE_enum("variant", None, VARIANTS, "Measure one variant in this process.", **define)


def measure(variant, preset, max_tokens, steps, config, profile_dir=None):
    """Runs one untimed epoch, then `steps` (0: an epoch) timed steps of `variant` in this
    process; returns the figures (`target_tokens_per_sec`, ...)."""
    import tensorflow as tf

    from convs2s_tf.data.pipeline import TrainingData
    from convs2s_tf.models.families import build_model
    from convs2s_tf.training import Trainer, TrainingConfig, create_strategy

    prepared = prepared_data(config)
    shards, index = prepared.shard_paths("train"), prepared.length_index("train")
    training_data = TrainingData(shards, index, max_tokens=max_tokens)
    model = model_config(preset, prepared.summary["vocab_size"], config)
    dtype = "bfloat16" if variant == "bfloat16" else "float32"
    training = TrainingConfig(dtype=dtype, xla=variant == "xla", progress_bar=False)
    strategy, model_dir = create_strategy("mirrored"), tempfile.mkdtemp()
    trainer = Trainer(lambda: build_model(model), training, model_dir, strategy)
    distributed = trainer.strategy.distribute_datasets_from_function(training_data.dataset)
    trainer.build_steps(distributed.element_spec)
    steps_per_epoch = training_data.steps_per_epoch(trainer.placement)
    iterator = iter(distributed)
    # The untimed first epoch: as a run's first, it meets every batch shape once
    # (tracing, XLA compilation of the loss, oneDNN primitives).
    for _ in range(steps_per_epoch):
        trainer.train_step(next(iterator))
    steps = steps or steps_per_epoch
    tokens = 0.0
    if profile_dir:
        tf.profiler.experimental.start(os.path.join(profile_dir, variant))
    start = time.perf_counter()
    for _ in range(steps):
        tokens += float(trainer.train_step(next(iterator))["tokens"])
    seconds = time.perf_counter() - start
    if profile_dir:
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


def variant_command(variant, preset, max_tokens, steps, config=FLAGFILE, profile_dir=None):
    """The command measuring one `variant` in a fresh process; its last stdout line is
    `measure`'s figures as JSON."""
    command = python("-m", "benchmarks.train_speed", f"--variant={variant}")
    command += [f"--preset={preset}", f"--max_tokens={max_tokens}", f"--steps={steps}"]
    command += [f"--config={config}"] + ([f"--profile_dir={profile_dir}"] if profile_dir else [])
    return command


def run(options):
    """The benchmark with parsed `options` (this module's flags)."""
    settings = (options.preset, options.max_tokens, options.steps, options.config)
    if options.variant:
        print(json.dumps(measure(options.variant, *settings, options.profile_dir)))
        return
    unknown = sorted(set(options.variants) - set(VARIANTS))
    if unknown:
        raise app.UsageError(f"Unknown --variants {unknown}; use {list(VARIANTS)}.")
    prepared_data(options.config)  # once, before the variants' processes read it
    results = {}
    for variant in options.variants:
        command = variant_command(variant, *settings, options.profile_dir)
        figures = last_json(run_timed(command)[1])
        results[variant] = round(figures["target_tokens_per_sec"])
        print(
            f"{options.preset} {variant}: {results[variant]:,} target tokens/s "
            f"({figures['steps']} steps in {figures['seconds']:.1f} s, "
            f"max_tokens {options.max_tokens})",
            flush=True,
        )
    line = {"target_tokens_per_sec": max(results.values())}
    line.update({f"target_tokens_per_sec_{name}": value for name, value in results.items()})
    line.update(preset=options.preset, max_tokens=options.max_tokens, steps=options.steps)
    print(json.dumps(line))


if __name__ == "__main__":
    main(define_flags, run)
