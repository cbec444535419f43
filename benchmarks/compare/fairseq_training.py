"""Training speed against the authors' implementation, fairseq-train: same models, same
data, same machine, one run.

    python -m benchmarks.compare.fairseq_training [--models=config,iwslt_de_en] \\
        [--dtypes=float32,bfloat16] [--max_tokens=4000] [--steps=100] [--work_dir=DIR]

On --config's prepared data (prepared first if needed), each model of --models (`config`:
the config's own model; any other name a preset as it is) trains on both systems in the
steady state: this project by `benchmarks.train_speed`'s measurement per --dtypes, and
fairseq-train (--cpu, PyTorch on --fairseq_threads threads, float32) on the training
split binarised with the SentencePiece vocabulary as its dictionary (the same tokens),
the model's `fconv` architecture with every option spelled out, the config's optimiser
and the same --max_tokens, no validation or checkpoints. fairseq's rate is its own `wps`
over the --steps updates after its first --fairseq_warmup_updates, or with --steps=0 over
its second epoch. Target tokens are the non-pad target tokens, end-of-sentence included,
in both; fairseq's other options are its defaults (batches in multiples of 8 sentences,
which leave out an epoch's last smaller batch). The defaults take about 11 minutes on 2
cores; run it alone on the machine.
Prints a table of the rates and ratios (> 1: this project faster) naming the CPU, then
one JSON line.
"""

import json
import os
import shlex
import tempfile

from absl import app, flags

from benchmarks import (
    CONFIG_MODEL,
    FLAGFILE,
    CommandError,
    config_flags,
    cpu_description,
    last_json,
    main,
    model_config,
    prepared_data,
    run_timed,
)
from benchmarks.compare.fairseq_tools import (
    environment,
    fairseq_train_command,
    parameters,
    progress_lines,
    write_data,
)
from benchmarks.train_speed import variant_command

# The model options spelled out for fairseq-train, in fairseq's names (`fconv`'s and the
# translation task's).
_MODEL_OPTIONS = (
    "dropout encoder_embed_dim encoder_layers decoder_embed_dim decoder_layers "
    "decoder_out_embed_dim decoder_attention max_source_positions max_target_positions"
).split()


def define_flags(flag_values=flags.FLAGS):
    define = {"flag_values": flag_values}
    models = f"Models to train: {CONFIG_MODEL!r} (--config's) or preset names."
    flags.DEFINE_list("models", [CONFIG_MODEL, "iwslt_de_en"], models, **define)
    flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "This project's compute dtypes.", **define)
    flags.DEFINE_integer("max_tokens", 4000, "Token budget per batch, both systems.", **define)
    steps = "Timed updates per measurement (0: the whole second epoch)."
    flags.DEFINE_integer("steps", 100, steps, **define)
    warmup = "With --steps: fairseq's untimed updates first (a multiple of the log interval)."
    flags.DEFINE_integer("fairseq_warmup_updates", 30, warmup, **define)
    flags.DEFINE_integer("fairseq_log_interval", 10, "fairseq's --log-interval.", **define)
    threads = os.cpu_count() or 1
    flags.DEFINE_integer("fairseq_threads", threads, "PyTorch's threads in fairseq.", **define)
    flags.DEFINE_string("config", FLAGFILE, "Flagfile of the data, model and optimiser.", **define)
    work_dir = "Keep fairseq's data here (default: temporary)."
    flags.DEFINE_string("work_dir", None, work_dir, **define)


def _rate(intervals, what):
    """The rate over `intervals` (progress lines, each `updates` updates long) from
    fairseq's `wps` and `wpb` (target tokens per update) of each."""
    if not intervals:
        raise CommandError(f"fairseq-train logged no {what}.")
    tokens = [line["wpb"] * line["updates"] for line in intervals]
    seconds = sum(count / line["wps"] for count, line in zip(tokens, intervals))
    return {
        "target_tokens_per_sec": sum(tokens) / seconds,
        "target_tokens": sum(tokens),
        "steps": round(sum(line["updates"] for line in intervals)),
        "seconds": seconds,
    }


def epoch_rate(log, epoch=2):
    """fairseq's rate over epoch `epoch`, from its end-of-epoch summary (its wall time
    from the end of the epoch before).

    Raises:
        CommandError: The log has no summary of that epoch, or none of the one before.
    """
    summaries = {line["epoch"]: line for line in progress_lines(log) if line["tag"] == "train"}
    if epoch not in summaries or (epoch > 1 and epoch - 1 not in summaries):
        raise CommandError(
            f"fairseq-train logged no summary of epoch {epoch} (summaries: {sorted(summaries)})."
        )
    before = summaries[epoch - 1]["num_updates"] if epoch > 1 else 0
    line = dict(summaries[epoch], updates=summaries[epoch]["num_updates"] - before)
    return _rate([line], f"epoch {epoch}")


def interval_rate(log, warmup_updates):
    """fairseq's rate over its `train_inner` lines after its first `warmup_updates`
    updates (each line's `wps`: the tokens of its interval over the wall time since the
    line before)."""
    intervals, previous = [], 0
    for line in progress_lines(log):
        if line["tag"] != "train_inner":
            continue
        line = dict(line, updates=line["num_updates"] - previous)
        previous = line["num_updates"]
        if previous - line["updates"] >= warmup_updates:
            intervals.append(line)
    return _rate(intervals, f"progress line after update {warmup_updates}")


def _complete(config):
    """`config` (`ConvS2S` arguments) with the constructor's defaults for what it omits."""
    from convs2s_tf.models import ConvS2S
    from convs2s_tf.models.families import model_arguments

    return ConvS2S(**model_arguments(config)).get_config()


def architecture(config):
    """The fairseq `fconv` architecture of a `ConvS2S` of `config` (its constructor
    arguments): the one of its layers and widths (dropout and sharing are options)."""
    from convs2s_tf.interop.fairseq_export import fairseq_architecture

    return fairseq_architecture(dict(_complete(config), share_decoder_input_output_embed=False))


def model_arguments(config):
    """fairseq-train's model options for a `ConvS2S` of `config`: its architecture and
    every `fconv` option spelled out, so that dropout, the shared output projection, ...
    are the model's whatever the architecture's defaults."""
    from convs2s_tf.interop.fairseq_export import fconv_model_config

    name = architecture(config)
    settings = fconv_model_config(_complete(config), name)
    arguments = [f"--arch={name}"]
    arguments += [f"--{option.replace('_', '-')}={settings[option]}" for option in _MODEL_OPTIONS]
    if settings["share_input_output_embed"]:
        arguments.append("--share-input-output-embed")
    return arguments


def training_arguments(training_config, max_tokens):
    """fairseq-train's optimisation options for a `TrainingConfig`: fairseq's NAG (the
    paper's Nesterov SGD), gradient clipping, label-smoothed cross-entropy, a fixed rate,
    batches of `max_tokens`."""
    return [
        "--optimizer=nag",
        f"--momentum={training_config.momentum}",
        "--weight-decay=0",
        f"--lr={training_config.learning_rate}",
        "--lr-scheduler=fixed",
        f"--clip-norm={training_config.clip_norm}",
        "--criterion=label_smoothed_cross_entropy",
        f"--label-smoothing={training_config.label_smoothing}",
        f"--max-tokens={max_tokens}",
        f"--seed={training_config.seed}",
    ]


def train_command(data_bin, languages, arguments, steps=0, warmup_updates=0, log_interval=10):
    """`fairseq-train` on `data_bin` with `arguments` (model and training options), without
    validation or checkpoints: two epochs (`steps` 0), else `warmup_updates + steps`
    updates, a progress line every `log_interval` updates."""
    length = f"--max-update={warmup_updates + steps}" if steps else "--max-epoch=2"
    save_dir = os.path.join(os.path.dirname(data_bin), "checkpoints")
    options = [length, "--disable-validation", "--no-save", f"--save-dir={save_dir}"]
    return fairseq_train_command(
        data_bin, languages, *arguments, *options, log_interval=log_interval
    )


def train(data_bin, languages, arguments, threads, cwd, steps=0, warmup_updates=0, log_interval=10):
    """Runs fairseq-train (`train_command`); returns its rate in the steady state (the
    second epoch, or the `steps` updates after the first `warmup_updates`) with the
    model's parameter count, the command and its wall time.

    Raises:
        CommandError: It failed, or logged no rate of that part.
    """
    command = train_command(data_bin, languages, arguments, steps, warmup_updates, log_interval)
    wall, stdout, stderr = run_timed(command, cwd, environment(threads))
    log = stdout + stderr
    figures = interval_rate(log, warmup_updates) if steps else epoch_rate(log)
    return dict(figures, parameters=parameters(log), command=command, wall_seconds=wall)


def _row(model, label, figures, fairseq_rate=None):
    rate = figures["target_tokens_per_sec"]
    per_update = figures["target_tokens"] / figures["steps"]
    ratio = f"{rate / fairseq_rate:.2f}x" if fairseq_rate else ""
    parameters = f"{figures['parameters']:,}" if figures.get("parameters") else "?"
    return (
        f"| {model} | {label} | {parameters} | {rate:,.0f} "
        f"| {figures['steps']} in {figures['seconds']:.1f} s | {per_update:,.0f} | {ratio} |"
    )


def table(results, cpu):
    """The comparison's table: per model of `results` (`{model: {"fairseq": figures,
    dtype: figures, ...}}`, fairseq's with its `architecture`), fairseq's row, then this
    project's per compute dtype with its ratio to fairseq (> 1: this project faster)."""
    lines = [
        f"CPU: {cpu}",
        "",
        "| model | system | parameters | target tokens/s | updates timed "
        "| target tokens/update | ratio (> 1: this project faster) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for model, measured in results.items():
        fairseq = measured["fairseq"]
        label = f"fairseq-train ({fairseq['architecture']}), float32"
        lines.append(_row(model, label, fairseq))
        for dtype, figures in measured.items():
            if dtype != "fairseq":
                label = f"this project, {dtype}"
                lines.append(_row(model, label, figures, fairseq["target_tokens_per_sec"]))
    return "\n".join(lines)


def summary(results, cpu):
    """The comparison's JSON line (`results` as for `table`): every rate and every ratio."""
    line = {"cpu": cpu}
    for model, measured in results.items():
        fairseq_rate = measured["fairseq"]["target_tokens_per_sec"]
        line[f"{model}_fairseq_target_tokens_per_sec"] = round(fairseq_rate)
        for dtype, figures in measured.items():
            if dtype != "fairseq":
                rate = figures["target_tokens_per_sec"]
                line[f"{model}_{dtype}_target_tokens_per_sec"] = round(rate)
                line[f"ratio_{model}_{dtype}"] = round(rate / fairseq_rate, 3)
    return line


def run(options):
    """The benchmark with parsed `options` (this module's flags)."""
    import torch

    from pipelines.flags.training import training_config_from_flags

    if options.steps and options.fairseq_warmup_updates % options.fairseq_log_interval:
        raise app.UsageError("--fairseq_warmup_updates must be a multiple of the log interval.")
    prepared = prepared_data(options.config)
    training = training_config_from_flags(config_flags(f"--flagfile={options.config}"))
    cpu = cpu_description()
    timed = f"{options.steps} updates" if options.steps else "the second epoch"
    print(
        f"CPU: {cpu}. Training split of {options.config}'s data (SentencePiece BPE), "
        f"{options.max_tokens}-token batches, {timed} timed on each side; "
        f"PyTorch {torch.__version__} on {options.fairseq_threads} threads.",
        flush=True,
    )
    results = {}
    with tempfile.TemporaryDirectory() as temporary:
        work_dir = options.work_dir or temporary
        os.makedirs(work_dir, exist_ok=True)
        languages = (prepared.source_lang, prepared.target_lang)
        data_bin, vocab_size = write_data(prepared, work_dir)
        timing = (options.steps, options.fairseq_warmup_updates, options.fairseq_log_interval)
        for model in options.models:
            config = model_config(model, vocab_size, options.config)
            arguments = model_arguments(config) + training_arguments(training, options.max_tokens)
            figures = train(
                data_bin, languages, arguments, options.fairseq_threads, work_dir, *timing
            )
            figures["architecture"] = architecture(config)
            measured = {"fairseq": figures}
            print(
                f"{model} fairseq-train: {figures['target_tokens_per_sec']:,.0f} target "
                f"tokens/s ({figures['wall_seconds']:.0f} s in all): "
                + shlex.join(["python", *figures.pop("command")[1:]]),
                flush=True,
            )
            for dtype in options.dtypes:
                command = variant_command(
                    dtype, model, options.max_tokens, options.steps, options.config
                )
                measured[dtype] = last_json(run_timed(command)[1])
                rate = measured[dtype]["target_tokens_per_sec"]
                print(f"{model} this project {dtype}: {rate:,.0f} target tokens/s", flush=True)
            results[model] = measured
    print(table(results, cpu))
    settings = dict(
        max_tokens=options.max_tokens,
        steps=options.steps,
        fairseq_warmup_updates=options.fairseq_warmup_updates if options.steps else None,
        fairseq_threads=options.fairseq_threads,
        torch=torch.__version__,
    )
    print(json.dumps(dict(summary(results, cpu), **settings)))


if __name__ == "__main__":
    main(define_flags, run)
