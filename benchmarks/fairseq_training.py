"""fairseq-train as `benchmarks.compare_fairseq_training` runs it: its data, its options
for a model of this project, and its rate read from its own log.

fairseq trains on the prepared training split written as SentencePiece pieces and
binarised by fairseq-preprocess with the SentencePiece vocabulary as its dictionary, so
its ids, and its batches' tokens, are this project's. Its rate is its own figure: `wps`,
target tokens (non-pad, end-of-sentence included, as counted here) over the wall time
since its previous progress line of the same kind. Its options are its defaults where the
model and the config set nothing (batch sizes in multiples of 8 sentences, which leaves
out an epoch's last batch when it holds fewer: at most 7 of Multi30k's 28,112 pairs).
"""

import os
import re
import types

from benchmarks import fairseq_commands

# fairseq's progress lines (`--log-format=simple`): the end-of-epoch summary
# "... | train | epoch 002 | loss 6.1 | ... | wps 4512.3 | ..." and the mid-epoch
# "... | train_inner | epoch 001:     10 / 118 loss=9.1, ..., wps=4412.7, ...".
_PROGRESS = re.compile(r"\| (train_inner|train) \| epoch (\d+)\b(.*)$", re.M)
_PARAMETERS = re.compile(r"num\. (?:shared )?model params: ([\d,]+)")
_STATISTIC = re.compile(r"(\w+)[= ](-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)(?=[,|\s]|$)")
# fairseq's names of the prepared splits.
_FAIRSEQ_SUBSETS = {"train": "train", "validation": "valid", "test": "test"}
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


def progress_lines(log):
    """fairseq-train's `train` and `train_inner` lines in `log`, in order, as dicts of
    their numbers (with `tag` and `epoch`)."""
    lines = []
    for tag, epoch, rest in _PROGRESS.findall(log):
        statistics = {name: float(value) for name, value in _STATISTIC.findall(rest)}
        lines.append({**statistics, "tag": tag, "epoch": int(epoch)})
    return lines


def _rate(intervals, what):
    """The rate over `intervals` (progress lines, each `updates` updates long) from
    fairseq's `wps` and `wpb` (target tokens per update) of each."""
    if not intervals:
        raise fairseq_commands.CommandError(f"fairseq-train logged no {what}.")
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
        raise fairseq_commands.CommandError(
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
    return fairseq_commands.fairseq_command(
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


def environment(threads):
    """fairseq-train's environment: PyTorch (OpenMP, MKL) on `threads` threads."""
    return dict(
        os.environ,
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        TF_CPP_MIN_LOG_LEVEL="2",
    )


def train(data_bin, languages, arguments, threads, cwd, steps=0, warmup_updates=0, log_interval=10):
    """Runs fairseq-train (`train_command`); returns its rate in the steady state (the
    second epoch, or the `steps` updates after the first `warmup_updates`) with the
    model's parameter count, the command and its wall time.

    Raises:
        CommandError: It failed, or logged no rate of that part.
    """
    command = train_command(data_bin, languages, arguments, steps, warmup_updates, log_interval)
    wall, stdout, stderr = fairseq_commands.run_timed(command, cwd, environment(threads))
    log = stdout + stderr
    figures = interval_rate(log, warmup_updates) if steps else epoch_rate(log)
    return dict(figures, parameters=parameters(log), command=command, wall_seconds=wall)


def parameters(log):
    """The model's parameter count fairseq-train logged (None if it logged none)."""
    match = _PARAMETERS.search(log)
    return int(match.group(1).replace(",", "")) if match else None


def write_data(prepared, work_dir, limit=None, splits=("train",)):
    """Writes `splits` of `prepared` (a `PreparedData`; the first `limit` pairs of each)
    as SentencePiece pieces and binarises them with the SentencePiece vocabulary as both
    dictionaries (as fairseq's subsets `train`, `valid` and `test`); returns fairseq's
    data directory and the vocabulary's size.

    Raises:
        ValueError: The SentencePiece model's first pieces are not fairseq's specials.
    """
    import sentencepiece as spm

    from convs2s_tf.interop.fairseq_dictionary import SPECIAL_SYMBOLS, Dictionary

    processor = spm.SentencePieceProcessor(model_file=prepared.sentencepiece_model_path)
    pieces = [processor.id_to_piece(index) for index in range(processor.get_piece_size())]
    if tuple(pieces[: len(SPECIAL_SYMBOLS)]) != SPECIAL_SYMBOLS:
        raise ValueError(
            f"{prepared.sentencepiece_model_path} numbers its first pieces "
            f"{pieces[: len(SPECIAL_SYMBOLS)]}, not fairseq's {list(SPECIAL_SYMBOLS)}."
        )
    dictionary = Dictionary.from_tokens(pieces[len(SPECIAL_SYMBOLS) :])
    languages = (prepared.source_lang, prepared.target_lang)
    for language in languages:
        dictionary.save(os.path.join(work_dir, f"dict.{language}.txt"))
    data_bin = os.path.join(work_dir, "data_bin")
    dictionaries = types.SimpleNamespace(
        output_dir=work_dir, source_lang=languages[0], target_lang=languages[1]
    )
    for split in splits:
        prefix = os.path.join(work_dir, f"{split}_pieces")
        for language, path in zip(languages, prepared.split_paths(split)):
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")[:-1][:limit]
            with open(f"{prefix}.{language}", "w", encoding="utf-8") as f:
                f.writelines(
                    " ".join(line) + "\n" for line in processor.encode(lines, out_type=str)
                )
        subset = _FAIRSEQ_SUBSETS[split]
        fairseq_commands.preprocess(dictionaries, [prefix], data_bin, work_dir, subset=subset)
    return data_bin, len(dictionary)


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
