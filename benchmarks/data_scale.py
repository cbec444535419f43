"""The data path at WMT size: preparation, training start-up and memory against pairs.

    python -m benchmarks.data_scale [--pairs=500000,1500000,4500000] \\
        [--startup_pairs=500000,4500000] [--large_pairs=12000000] \\
        [--work_dir=/tmp/convs2s_data_scale]

The corpus is Multi30k's 29,000 training pairs replicated to N pairs (WMT'14 en-de has
4.5M), with its validation and test sets. Per size of --pairs, `pipelines.prepare_data`
from nothing: wall time, peak RSS of its process tree (sampled every 0.1 s), size on
disk; per size of --startup_pairs and --large_pairs (beyond TF's 10M-element file cache),
`pipelines.train` with --config's model for 5 updates: time to exit and peak RSS. Ends
with one JSON line.
"""

import gzip
import json
import os
import shutil
import subprocess
import sys
import time

from absl import flags

from benchmarks import FLAGFILE, ROOT, TreeMemory, child_env, cpu_description, directory_bytes, main

RAW = os.path.join(ROOT, "convs2s_tf", "datasets", "multi30k", "raw")

FLAGS = flags.FLAGS


def define_flags(flag_values=flags.FLAGS):
    define = {"flag_values": flag_values}
    flags.DEFINE_list("pairs", ["500000", "1500000", "4500000"], "Sizes to prepare.", **define)
    flags.DEFINE_list("startup_pairs", ["500000", "4500000"], "Sizes to train on.", **define)
    flags.DEFINE_integer("large_pairs", 12_000_000, "Beyond TF's cache (0: skip).", **define)
    flags.DEFINE_string("work_dir", "/tmp/convs2s_data_scale", "Scratch (kept).", **define)
    flags.DEFINE_string("config", FLAGFILE, "Flagfile of the model, training and input.", **define)


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
            whole, rest = divmod(pairs, len(lines)) if split == "train" else (1, 0)
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                for _ in range(whole):
                    f.write("".join(line + "\n" for line in lines))
                f.write("".join(line + "\n" for line in lines[:rest]))
            os.replace(path + ".tmp", path)
    return prefixes


def corpus_flags(prefixes, pairs):
    splits = [f"--{split}_prefix={prefix}" for split, prefix in prefixes.items()]
    languages = ["--source_lang=en", "--target_lang=de", "--vocab_size=8000"]
    data_dir = f"--data_dir={os.path.join(FLAGS.work_dir, f'data_{pairs}')}"
    return ["--dataset=local", *splits, *languages, data_dir]


def run_measured(command, cwd=ROOT):
    """Runs `command`; returns (seconds, peak RSS of its process tree in GB, stdout)."""
    start, environment = time.perf_counter(), child_env(PYTHONPATH=cwd)
    pipe = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process = subprocess.Popen(command, cwd=cwd, env=environment, **pipe)
    memory = TreeMemory(process.pid)
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - start
    memory.stop()
    if process.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{stderr[-3000:]}")
    return seconds, max(memory.samples, default=0) / 1e9, stdout


def prepare(pairs):
    prefixes = write_corpus(pairs)
    data_dir = os.path.join(FLAGS.work_dir, f"data_{pairs}")
    shutil.rmtree(data_dir, ignore_errors=True)
    seconds, peak, _ = run_measured(
        [sys.executable, "-m", "pipelines.prepare_data", *corpus_flags(prefixes, pairs)]
    )
    figures = {"seconds": round(seconds, 1), "peak_rss_gb": round(peak, 2)}
    figures["disk_mb"] = round(directory_bytes(data_dir) / 1e6, 1)
    print(f"prepare {pairs:,} pairs: {figures}", flush=True)
    return figures


def start_training(pairs):
    prefixes = write_corpus(pairs)
    model_dir = os.path.join(FLAGS.work_dir, f"run_{pairs}")
    shutil.rmtree(model_dir, ignore_errors=True)
    command = [sys.executable, "-m", "pipelines.train", f"--flagfile={FLAGS.config}"]
    command += [*corpus_flags(prefixes, pairs), f"--model_dir={model_dir}", "--max_steps=5"]
    command += ["--valid_beam_size=0", "--test_beam_size=0", "--progress_bar=false"]
    seconds, peak, _ = run_measured(command)
    figures = {"seconds_to_exit": round(seconds, 1), "peak_rss_gb": round(peak, 2)}
    print(f"train 5 updates on {pairs:,} pairs: {figures}", flush=True)
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
    print(json.dumps(result))


if __name__ == "__main__":
    main(define_flags, run)
