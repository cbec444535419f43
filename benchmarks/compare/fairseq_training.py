"""Training speed against the authors' implementation, fairseq-train: same models, same
data, same machine, one run.

    python -m benchmarks.compare.fairseq_training [--models=config,iwslt_de_en] \\
        [--dtypes=float32,bfloat16] [--max_tokens=4000] [--steps=100] [--work_dir=DIR]

On the prepared Multi30k en-de data of configs/multi30k_en_de.cfg (prepared first if
needed) and its SentencePiece BPE, each model of --models (`config`: the config's own
model, multi30k_cpu with the shared output projection; any other name a preset as it is)
trains on both systems, in the steady state, start-up and warm-up left out:

* this project: `benchmarks.train_speed`'s measurement in a fresh process per
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

Its options are fairseq's defaults where the model and the config set nothing (batch
sizes in multiples of 8 sentences, which leaves out an epoch's last batch when it holds
fewer: at most 7 of Multi30k's 28,112 pairs).
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
    model_config,
    prepared_data,
    run_timed,
)
from benchmarks.compare.fairseq_tools import (
    environment,
    fairseq_command,
    parameters,
    progress_lines,
    write_data,
)
from benchmarks.train_speed import variant_command

# The model options spelled out for fairseq-train, in fairseq's names (`fconv`'s and the
# translation task's).
_MODEL_OPTIONS = (
    "dropout",
    "encoder_embed_dim",
    "encoder_layers",
    "decoder_embed_dim",
    "decoder_layers",
    "decoder_out_embed_dim",
    "decoder_attention",
    "max_source_positions",
    "max_target_positions",
)


def define_flags(flag_values=flags.FLAGS):
    define = {"flag_values": flag_values}
    flags.DEFINE_list(
        "models",
        [CONFIG_MODEL, "iwslt_de_en"],
        f"Models to train: {CONFIG_MODEL!r} (configs/multi30k_en_de.cfg's) or preset names.",
        **define,
    )
    flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "This project's compute dtypes.", **define)
    flags.DEFINE_integer("max_tokens", 4000, "Token budget per batch, both systems.", **define)
    flags.DEFINE_integer(
        "steps", 100, "Timed updates per measurement (0: the whole second epoch).", **define
    )
    flags.DEFINE_integer(
        "fairseq_warmup_updates",
        30,
        "With --steps: fairseq's untimed updates first (a multiple of --fairseq_log_interval).",
        **define,
    )
    flags.DEFINE_integer("fairseq_log_interval", 10, "fairseq's --log-interval.", **define)
    threads = os.cpu_count() or 1
    flags.DEFINE_integer("fairseq_threads", threads, "PyTorch's threads in fairseq.", **define)
    flags.DEFINE_string("config", FLAGFILE, "Flagfile of the data, model and optimiser.", **define)
    flags.DEFINE_string(
        "work_dir", None, "Keep fairseq's data here (default: temporary).", **define
    )


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
    """`fairseq-train` on `data_bin` with `arguments` (model and training options), on
    the CPU, without validation or checkpoints: two epochs (`steps` 0), else
    `warmup_updates + steps` updates, a progress line every `log_interval` updates."""
    if steps:
        length = f"--max-update={warmup_updates + steps}"
    else:
        length = "--max-epoch=2"
    return fairseq_command(
        "train",
        data_bin,
        f"--source-lang={languages[0]}",
        f"--target-lang={languages[1]}",
        *arguments,
        length,
        "--cpu",
        "--disable-validation",
        "--no-save",
        f"--save-dir={os.path.join(os.path.dirname(data_bin), 'checkpoints')}",
        "--no-progress-bar",
        "--log-format=simple",
        f"--log-interval={log_interval}",
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
    """The comparison's table: per model, fairseq's row, then this project's per compute
    dtype with its ratio to fairseq (> 1: this project is faster).

    Args:
        results: `{model: {"fairseq": figures, dtype: figures, ...}}`, figures being
            `target_tokens_per_sec`, `target_tokens`, `steps` and `seconds` (and, for
            fairseq, its `architecture`).
        cpu: The CPU's description.
    """
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
        for model in options.models:
            config = model_config(model, vocab_size, options.config)
            figures = train(
                data_bin,
                languages,
                model_arguments(config) + training_arguments(training, options.max_tokens),
                options.fairseq_threads,
                work_dir,
                options.steps,
                options.fairseq_warmup_updates,
                options.fairseq_log_interval,
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


def main(argv):
    del argv
    run(flags.FLAGS)


if __name__ == "__main__":
    define_flags()
    app.run(main)
