"""The data path at WMT size: preparation, training start-up and memory against pairs.

    python -m benchmarks.data_scale [--pairs=500000,1500000,4500000] \
        [--startup_pairs=500000,4500000] [--large_pairs=12000000] \
        [--throughput_presets=multi30k_cpu,iwslt_de_en] [--baseline_revision=d422e8e] \
        [--input_epochs=0] [--work_dir=/tmp/convs2s_data_scale]

The corpus is synthetic in size, real in text: Multi30k's 29,000 training pairs
replicated to N pairs (WMT'14 en-de has 4.5M, en-fr 36M), with Multi30k's validation and
test sets, as local files. For each size in --pairs, `pipelines.prepare_data` runs from
nothing (--workers: every core): wall time, peak RSS of its process tree (the main
process and its tokenising workers, sampled every 0.1 s) and size on disk. For each
size in --startup_pairs, `pipelines.train` with configs/multi30k_en_de.cfg's model runs
5 updates on the prepared data (loss-only validation, no test translation): command to
exit, and peak RSS. --large_pairs is prepared
and trained the same way (the corpus TF's file cache refused beyond 10M elements).

With --baseline_revision, the steady-state training rate (`benchmarks.train_speed`,
bfloat16, one warm-up epoch then --throughput_steps timed steps) of each preset in
--throughput_presets on Multi30k from the shards is measured beside the same benchmark
at that revision (text tokenised in-graph and cached: the path the shards replaced), in
a git worktree, in this run. Ends with one JSON line.
With --input_epochs, the training input pipeline alone (`TrainingData` over --config's
prepared shards, prepared first if needed, with its batching flags): one warm-up epoch,
then --input_epochs epochs timed as a trainer consumes them (one iterator), in target
tokens per second. Ends with one JSON line.
"""

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import psutil
from absl import app, flags

from benchmarks import ROOT, cpu_description

RAW = os.path.join(ROOT, "convs2s_tf", "datasets", "multi30k", "raw")
CONFIG = os.path.join(ROOT, "configs", "multi30k_en_de.cfg")

FLAGS = flags.FLAGS


def define_flags(flag_values=flags.FLAGS):
    define = {"flag_values": flag_values}
    flags.DEFINE_list(
        "pairs", ["500000", "1500000", "4500000"], "Corpus sizes to prepare.", **define
    )
    flags.DEFINE_list(
        "startup_pairs", ["500000", "4500000"], "Sizes to start training on.", **define
    )
    flags.DEFINE_integer(
        "large_pairs", 12_000_000, "A corpus beyond TF's cache (0: skip).", **define
    )
    flags.DEFINE_list(
        "throughput_presets", ["multi30k_cpu", "iwslt_de_en"], "Presets of the rates.", **define
    )
    flags.DEFINE_string("baseline_revision", None, "Git revision to compare rates with.", **define)
    flags.DEFINE_integer("throughput_steps", 150, "Timed steps of each rate measurement.", **define)
    flags.DEFINE_integer("input_epochs", 0, "Input pipeline epochs timed (0: skip).", **define)
    flags.DEFINE_string(
        "work_dir", "/tmp/convs2s_data_scale", "Scratch directory (kept).", **define
    )
    flags.DEFINE_string("config", CONFIG, "Flagfile of the model, training and input.", **define)


def multi30k_lines(stem, language):
    with gzip.open(os.path.join(RAW, f"{stem}.{language}.gz"), "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def write_corpus(pairs):
    """Writes Multi30k's training pairs replicated to `pairs`; returns the file prefixes."""
    directory = os.path.join(FLAGS.work_dir, f"corpus_{pairs}")
    os.makedirs(directory, exist_ok=True)
    prefixes = {}
    for split, stem in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr")):
        prefix = os.path.join(directory, split)
        prefixes[split] = prefix
        for language in ("en", "de"):
            path = f"{prefix}.{language}"
            if os.path.exists(path):
                continue
            lines = multi30k_lines(stem, language)
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                if split != "train":
                    f.write("\n".join(lines) + "\n")
                else:
                    block = "\n".join(lines) + "\n"
                    whole, rest = divmod(pairs, len(lines))
                    for _ in range(whole):
                        f.write(block)
                    f.write("".join(line + "\n" for line in lines[:rest]))
            os.replace(path + ".tmp", path)
    return prefixes


def corpus_flags(prefixes, pairs):
    return [
        "--dataset=local",
        f"--train_prefix={prefixes['train']}",
        f"--valid_prefix={prefixes['valid']}",
        f"--test_prefix={prefixes['test']}",
        "--source_lang=en",
        "--target_lang=de",
        "--vocab_size=8000",
        f"--data_dir={os.path.join(FLAGS.work_dir, f'data_{pairs}')}",
    ]


def run_measured(command, cwd=ROOT):
    """Runs `command`; returns (seconds, peak RSS of its process tree in GB, stdout)."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = [0]

    def sample():
        root = psutil.Process(process.pid)
        while process.poll() is None:
            try:
                tree = [root, *root.children(recursive=True)]
                peak[0] = max(peak[0], sum(p.memory_info().rss for p in tree))
            except psutil.Error:
                pass
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - start
    sampler.join()
    if process.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{stderr[-3000:]}")
    return seconds, peak[0] / 1e9, stdout


def disk_mb(directory):
    total = sum(
        os.path.getsize(os.path.join(d, name))
        for d, _, names in os.walk(directory)
        for name in names
    )
    return total / 1e6


def prepare(pairs):
    prefixes = write_corpus(pairs)
    data_dir = os.path.join(FLAGS.work_dir, f"data_{pairs}")
    shutil.rmtree(data_dir, ignore_errors=True)
    seconds, peak, _ = run_measured(
        [sys.executable, "-m", "pipelines.prepare_data", *corpus_flags(prefixes, pairs)]
    )
    figures = {"seconds": round(seconds, 1), "peak_rss_gb": round(peak, 2)}
    figures["disk_mb"] = round(disk_mb(data_dir), 1)
    print(f"prepare {pairs:,} pairs: {figures}", flush=True)
    return figures


def start_training(pairs):
    prefixes = write_corpus(pairs)
    model_dir = os.path.join(FLAGS.work_dir, f"run_{pairs}")
    shutil.rmtree(model_dir, ignore_errors=True)
    seconds, peak, _ = run_measured(
        [
            sys.executable,
            "-m",
            "pipelines.train",
            f"--flagfile={FLAGS.config}",
            *corpus_flags(prefixes, pairs),
            f"--model_dir={model_dir}",
            "--max_steps=5",
            "--valid_beam_size=0",
            "--test_beam_size=0",
            "--progress_bar=false",
        ]
    )
    figures = {"seconds_to_exit": round(seconds, 1), "peak_rss_gb": round(peak, 2)}
    print(f"train 5 updates on {pairs:,} pairs: {figures}", flush=True)
    return figures


def training_rate(tree, preset, data_dir):
    """`benchmarks.train_speed` of `preset` in `tree` on Multi30k in `data_dir` (the
    benchmark's name at older revisions: `train_throughput`)."""
    flagfile = os.path.join(FLAGS.work_dir, f"throughput_{os.path.basename(tree)}.cfg")
    with open(flagfile, "w") as f:
        f.write(f"--flagfile={os.path.join(tree, 'configs', 'multi30k_en_de.cfg')}\n")
        f.write(f"--data_dir={data_dir}\n")
    command = [
        sys.executable,
        "-m",
        "benchmarks."
        + next(
            name
            for name in ("train_speed", "train_throughput")
            if os.path.exists(os.path.join(tree, "benchmarks", name + ".py"))
        ),
        f"--preset={preset}",
        "--variants=bfloat16",
        f"--steps={FLAGS.throughput_steps}",
        f"--config={flagfile}",
    ]
    _, _, stdout = run_measured(command, cwd=tree)
    return json.loads(stdout.strip().splitlines()[-1])["target_tokens_per_sec"]


def compare_rates():
    baseline = os.path.join(FLAGS.work_dir, "baseline")
    if not os.path.isdir(baseline):
        subprocess.run(
            ["git", "worktree", "add", "--detach", baseline, FLAGS.baseline_revision],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    rates = {}
    for preset in FLAGS.throughput_presets:
        shards = training_rate(ROOT, preset, os.path.join(FLAGS.work_dir, "multi30k_shards"))
        text = training_rate(baseline, preset, os.path.join(FLAGS.work_dir, "multi30k_text"))
        rates[preset] = {"shards": shards, "text_baseline": text, "ratio": round(shards / text, 3)}
        print(f"{preset} bfloat16 tokens/s: shards {shards:,} vs text {text:,}", flush=True)
    return rates


def input_pipeline():
    """The training input pipeline's rate over --config's prepared shards."""
    import numpy as np

    from benchmarks import config_flags, prepared_data
    from convs2s_tf import vocabulary
    from convs2s_tf.data.pipeline import Placement, TrainingData
    from pipelines.flags.data import training_dataset_kwargs

    setup_start = time.perf_counter()
    prepared = prepared_data(FLAGS.config)
    kwargs = training_dataset_kwargs(config_flags(f"--flagfile={FLAGS.config}"))
    data = TrainingData(prepared.shard_paths("train"), prepared.length_index("train"), **kwargs)
    stats, steps = data.stats(), data.steps_per_epoch(Placement())
    iterator = iter(data.dataset(None))
    figures = {"setup_seconds": round(time.perf_counter() - setup_start, 2)}
    seconds = []
    for epoch in range(FLAGS.input_epochs + 1):  # the first: a warm-up
        start, tokens = time.perf_counter(), 0
        for _ in range(steps):
            target = next(iterator)["target"].numpy()
            tokens += int(np.count_nonzero(target != vocabulary.PAD_ID))
        if tokens != stats.target_tokens:
            raise AssertionError(
                f"epoch {epoch}: {tokens} target tokens, not {stats.target_tokens}"
            )
        seconds.append(time.perf_counter() - start)
    figures.update(
        target_tokens_per_sec=round(stats.target_tokens * FLAGS.input_epochs / sum(seconds[1:])),
        epochs=FLAGS.input_epochs,
        target_tokens_per_epoch=stats.target_tokens,
        batches_per_epoch=stats.batches_per_epoch,
        seconds_per_epoch=round(sum(seconds[1:]) / FLAGS.input_epochs, 4),
    )
    print(f"input pipeline: {figures}", flush=True)
    return figures


def run(options):
    """The benchmark with parsed `options` (this module's flags)."""
    global FLAGS
    FLAGS = options  # the functions above read the options from here
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    result = {"cpu": cpu_description(), "corpus": "Multi30k training pairs replicated"}
    result["prepare"] = {pairs: prepare(int(pairs)) for pairs in FLAGS.pairs}
    result["startup"] = {pairs: start_training(int(pairs)) for pairs in FLAGS.startup_pairs}
    if FLAGS.large_pairs:
        result["large"] = {
            "pairs": FLAGS.large_pairs,
            "prepare": prepare(FLAGS.large_pairs),
            "train": start_training(FLAGS.large_pairs),
        }
    if FLAGS.baseline_revision:
        result["training_rate"] = compare_rates()
    if FLAGS.input_epochs:
        result["input_pipeline"] = input_pipeline()
    print(json.dumps(result))


def main(argv):
    del argv
    run(flags.FLAGS)


if __name__ == "__main__":
    define_flags()
    app.run(main)
