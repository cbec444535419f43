"""What the comparisons with fairseq share: its command-line tools (`python -m
fairseq_cli.TOOL`, in this interpreter, on the CPU) and their output, fairseq's data
written from this project's prepared data (SentencePiece pieces binarised with the
SentencePiece vocabulary as the dictionary, so the ids are this project's), and the
report of `benchmarks.compare.fairseq`.
"""

import collections
import os
import re
import sys
import types

from benchmarks import CommandError, child_env, cpu_description, read_lines, run_timed, write_lines

# fairseq-generate's summary line (its own timer).
_TRANSLATED = re.compile(
    r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in [\d.]+s \(([\d.]+) sentences/s"
)
# The detokenised hypothesis lines of fairseq-generate and fairseq-interactive.
_DETOKENIZED = re.compile(r"^D-(\d+)\t[^\t]*\t(.*)$", re.M)

GenerateResult = collections.namedtuple(
    "GenerateResult", ["sentences_per_second", "wall_seconds", "translations"]
)
# sentences_per_second: fairseq's own timer (its search calls alone, `task.inference_step`).


def fairseq_command(tool, *arguments):
    """`python -m fairseq_cli.TOOL ARGUMENTS...` in this interpreter."""
    return [sys.executable, "-m", f"fairseq_cli.{tool}", *map(str, arguments)]


def fairseq_train_command(data_bin, languages, *arguments, log_interval=10):
    """`fairseq-train` on `data_bin` for `languages` (source, target) with `arguments`, on
    the CPU, a progress line every `log_interval` updates (`progress_lines` reads them)."""
    source, target = (f"--source-lang={languages[0]}", f"--target-lang={languages[1]}")
    logging = ["--no-progress-bar", "--log-format=simple", f"--log-interval={log_interval}"]
    return fairseq_command("train", data_bin, source, target, *arguments, "--cpu", *logging)


def search_arguments(search_config):
    """fairseq's generation options for a `SearchConfig` (the same search)."""
    return [
        f"--beam={search_config.beam_size}",
        f"--max-len-a={search_config.max_len_a}",
        f"--max-len-b={search_config.max_len_b}",
        f"--min-len={search_config.min_length}",
        f"--lenpen={search_config.length_penalty}",
        f"--unkpen={search_config.unk_penalty}",
        "--cpu",
    ]


def detokenized_hypotheses(stdout, count):
    """The `D-` lines of fairseq's output as a list in sentence order.

    Raises:
        CommandError: A sentence has no hypothesis.
    """
    found = {int(index): text for index, text in _DETOKENIZED.findall(stdout)}
    missing = [index for index in range(count) if index not in found]
    if missing:
        raise CommandError(
            f"fairseq printed no hypothesis for {len(missing)} of {count} sentences "
            f"(first: {missing[0]})."
        )
    return [found[index] for index in range(count)]


def _languages(export):
    return [f"--source-lang={export.source_lang}", f"--target-lang={export.target_lang}"]


def preprocess(export, prefixes, destination, cwd):
    """Binarises the pieces files `PREFIX.SRC`/`PREFIX.TGT` of `prefixes` ({subset:
    [prefix, ...]}, subsets of "train", "valid" and "test") with the exported dictionaries
    (`export.output_dir/dict.LANG.txt`) in one fairseq-preprocess: the subsets `test`,
    `test1`, ... of `destination` (`train`, `train1`, ... and so on)."""
    source, target = export.source_lang, export.target_lang
    dictionaries = [
        os.path.join(export.output_dir, f"dict.{side}.txt") for side in (source, target)
    ]
    options = [f"--source-lang={source}", f"--target-lang={target}", "--workers=1"]
    options += [f"--srcdict={dictionaries[0]}", f"--tgtdict={dictionaries[1]}"]
    options += [f"--{subset}pref={','.join(paths)}" for subset, paths in prefixes.items()]
    options.append(f"--destdir={destination}")
    run_timed(fairseq_command("preprocess", *options), cwd)


def generate(export, data_bin, subset, count, batch_size, search_config, cwd):
    """fairseq-generate on binarised `subset` (`count` sentences), batches of
    `batch_size` sorted by length as fairseq sorts them; returns a `GenerateResult`.

    Raises:
        CommandError: It failed, or translated another number of sentences.
    """
    options = [f"--path={export.checkpoint_path}", f"--gen-subset={subset}", *_languages(export)]
    # Its default multiple (8) drops a last batch that is not a multiple of it.
    options += [f"--batch-size={batch_size}", "--required-batch-size-multiple=1"]
    options += ["--post-process=sentencepiece", *search_arguments(search_config)]
    seconds, stdout, stderr = run_timed(fairseq_command("generate", data_bin, *options), cwd)
    match = _TRANSLATED.search(stderr)
    if not match or int(match.group(1).replace(",", "")) != count:
        raise CommandError(
            f"fairseq-generate did not report {count} translated sentences:\n{stderr[-2000:]}"
        )
    return GenerateResult(float(match.group(3)), seconds, detokenized_hypotheses(stdout, count))


def interactive(export, input_path, count, batch_size, search_config, cwd):
    """fairseq-interactive translating the raw text of `input_path` (`count` lines) with
    the export's SentencePiece model (`--bpe sentencepiece`), `batch_size` sentences at a
    time from a buffer of the whole input (sorted by length within it, as fairseq does);
    returns `(wall seconds, translations)`."""
    options = [f"--path={export.checkpoint_path}", *_languages(export), "--bpe=sentencepiece"]
    options += [f"--sentencepiece-model={export.sentencepiece_model}", f"--input={input_path}"]
    options += [f"--batch-size={min(batch_size, count)}", f"--buffer-size={max(batch_size, count)}"]
    options += search_arguments(search_config)
    command = fairseq_command("interactive", export.output_dir, *options)
    seconds, stdout, _ = run_timed(command, cwd)
    return seconds, detokenized_hypotheses(stdout, count)


# fairseq's progress lines (`--log-format=simple`): the end-of-epoch summary
# "... | train | epoch 002 | loss 6.1 | ... | wps 4512.3 | ..." and the mid-epoch
# "... | train_inner | epoch 001:     10 / 118 loss=9.1, ..., wps=4412.7, ...".
_PROGRESS = re.compile(r"\| (train_inner|train) \| epoch (\d+)\b(.*)$", re.M)
_PARAMETERS = re.compile(r"num\. (?:shared )?model params: ([\d,]+)")
_STATISTIC = re.compile(r"(\w+)[= ](-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)(?=[,|\s]|$)")
# fairseq's names of the prepared splits.
_FAIRSEQ_SUBSETS = {"train": "train", "validation": "valid", "test": "test"}


def progress_lines(log):
    """fairseq-train's `train` and `train_inner` lines in `log`, in order, as dicts of
    their numbers (with `tag` and `epoch`)."""
    lines = []
    for tag, epoch, rest in _PROGRESS.findall(log):
        statistics = {name: float(value) for name, value in _STATISTIC.findall(rest)}
        lines.append({**statistics, "tag": tag, "epoch": int(epoch)})
    return lines


def environment(threads):
    """fairseq-train's environment: PyTorch (OpenMP, MKL) on `threads` threads."""
    return child_env(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))


def parameters(log):
    """The model's parameter count fairseq-train logged (None if it logged none)."""
    match = _PARAMETERS.search(log)
    return int(match.group(1).replace(",", "")) if match else None


def write_data(prepared, work_dir, limit=None, splits=("train",)):
    """Writes `splits` of `prepared` (a `PreparedData`; the first `limit` pairs of each)
    as SentencePiece pieces binarised with the SentencePiece vocabulary as both
    dictionaries (fairseq's subsets `train`, `valid`, `test`); returns fairseq's data
    directory and the vocabulary's size. Raises ValueError if the SentencePiece model's
    first pieces are not fairseq's specials."""
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
    prefixes = {}
    for split in splits:
        prefix = os.path.join(work_dir, f"{split}_pieces")
        for language, path in zip(languages, prepared.split_paths(split)):
            pieces = processor.encode(read_lines(path)[:limit], out_type=str)
            write_lines(f"{prefix}.{language}", [" ".join(line) for line in pieces])
        prefixes[_FAIRSEQ_SUBSETS[split]] = [prefix]
    preprocess(dictionaries, prefixes, data_bin, work_dir)
    return data_bin, len(dictionary)


# The report of benchmarks.compare.fairseq.
# (label, this project's measurement, fairseq's); {batch}, {latency} and {sentences} are
# filled in. A measurement ending in _ms or _seconds is a time (lower is better), any
# other a rate. fairseq's batch rows are fairseq-generate's own timer, its
# whole-process rows fairseq-interactive's wall time.
# fmt: off
_ROWS = (
    ("in-process float32, batch {batch}, sentences/s (fairseq-generate)",
     "in_process_float32_batch_sentences_per_sec", "fairseq_batch_sentences_per_sec"),
    ("in-process bfloat16, batch {batch}, sentences/s (fairseq-generate, float32)",
     "in_process_bfloat16_batch_sentences_per_sec", "fairseq_batch_sentences_per_sec"),
    ("in-process, batch 1, ms/sentence, first {latency} (fairseq-generate)",
     "in_process_float32_batch1_ms", "fairseq_batch1_ms"),
    ("fresh SavedModel, batch 1, mean of the first {latency} requests, ms",
     "saved_model_batch1_mean_ms", "fairseq_batch1_ms"),
    ("fresh SavedModel, the same {latency} again (warm), ms",
     "saved_model_batch1_warm_mean_ms", "fairseq_batch1_ms"),
    ("fresh SavedModel, batch {batch}, first pass, sentences/s",
     "saved_model_batch_sentences_per_sec", "fairseq_batch_sentences_per_sec"),
    ("whole process, {sentences} lines, s (translate vs fairseq-interactive)",
     "translate_all_seconds", "interactive_all_seconds"),
    ("whole process, one sentence, s",
     "translate_one_seconds", "interactive_one_seconds"),
    ("importing the command-line module, s",
     "import_translate_seconds", "import_interactive_seconds"),
)
# fmt: on
# Translations compared for identity: (fairseq's or the reference, this project's).
_AGREEMENT = (
    ("fairseq-generate", "in-process float32"),
    ("fairseq-interactive", "pipelines.translate"),
    ("in-process float32", "fresh SavedModel"),
)


def header(model_dir, export, comparison):
    """What is compared, on what."""
    import torch

    search = comparison.search_config
    lines = [
        f"benchmarks.compare.fairseq: {model_dir} as fairseq {export.architecture} "
        f"({export.checkpoint_path}); {len(comparison.sources)} sentences, beam "
        f"{search.beam_size}, maximum length {search.max_len_a} * source + {search.max_len_b}",
        f"CPU: {cpu_description()}; PyTorch threads: {torch.get_num_threads()}",
        "fairseq's batch figures are fairseq-generate's own timer (its search calls alone); "
        "whole processes are wall times.",
    ]
    load = os.getloadavg()[0]
    # Above one waiting process per core, others compete (this one accounts for one).
    if load > os.cpu_count():
        # PyTorch's OpenMP threads wait for each other and slow down far more than
        # TensorFlow's thread pool when other processes take the cores.
        lines.append(
            f"WARNING: the CPU is busy (load average {load:.1f}); the figures, fairseq's "
            "above all, are not representative."
        )
    return "\n".join(lines)


def _ratio(ours, theirs, key):
    """> 1 when this project is faster."""
    return theirs / ours if key.endswith(("_ms", "_seconds")) else ours / theirs


def _rows(comparison):
    """(label, ours, fairseq's, ratio) of every row whose two numbers were measured."""
    results = comparison.results
    values = dict(batch=comparison.batch_size, latency=results["latency_sentences"])
    values["sentences"] = results["sentences"]
    for label, ours, theirs in _ROWS:
        if ours in results and theirs in results:
            ratio = _ratio(results[ours], results[theirs], ours)
            yield label.format(**values), results[ours], results[theirs], ratio, ours


def agreement(comparison):
    """{"A vs B": identical translations} of every compared pair that was translated."""
    counts = {}
    for first, second in _AGREEMENT:
        if first in comparison.translations and second in comparison.translations:
            pairs = zip(comparison.translations[first], comparison.translations[second])
            counts[f"{first} vs {second}"] = sum(a == b for a, b in pairs)
    return counts


def table(comparison):
    """A Markdown table of the rows, the SavedModel's load figures and the agreement."""
    lines = [
        "| | this project | fairseq | ratio (> 1: this project faster) |",
        "| --- | --- | --- | --- |",
    ]
    for label, ours, theirs, ratio, _ in _rows(comparison):
        lines.append(f"| {label} | {ours:,.2f} | {theirs:,.2f} | {ratio:.2f}x |")
    results = comparison.results
    if "saved_model_load_seconds" in results:
        lines.append(
            f"\nFresh SavedModel process: imports {results['saved_model_import_seconds']:.2f} s, "
            f"load {results['saved_model_load_seconds']:.2f} s, first request "
            f"{results['saved_model_first_request_ms']:.1f} ms (export took "
            f"{results['saved_model_export_seconds']:.1f} s)."
        )
    if results.get("import_interactive_loads_tensorflow"):
        lines.append(
            "fairseq's import includes TensorFlow's here (torch.utils.tensorboard imports it "
            "when it is installed)."
        )
    for pair, count in agreement(comparison).items():
        lines.append(f"Identical translations, {pair}: {count} of {results['sentences']}")
    return "\n".join(lines)


def summary(comparison):
    """The JSON summary: every measurement, each row's ratio, the agreement, the CPU."""
    summary = {"cpu": cpu_description(), "batch_size": comparison.batch_size}
    summary.update(comparison.results)
    for _, _, _, ratio, key in _rows(comparison):
        summary[f"ratio_{key}"] = round(ratio, 2)
    for pair, count in agreement(comparison).items():
        summary[f"identical_{pair.replace(' ', '_')}"] = count
    return summary
