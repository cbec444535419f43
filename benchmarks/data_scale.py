"""The data path at WMT size: preparation, training start-up and memory against pairs.

    python -m benchmarks.data_scale [--pairs=500000,1500000,4500000] \
        [--startup_pairs=500000,4500000] [--large_pairs=12000000] \
        [--throughput_presets=multi30k_cpu,iwslt_de_en] [--baseline_revision=d422e8e] \
        [--work_dir=/tmp/convs2s_data_scale]

The corpus is synthetic in size, real in text: Multi30k's 29,000 training pairs
replicated to N pairs (WMT'14 en-de has 4.5M, en-fr 36M), with Multi30k's validation and
test sets, as local files. For each size in --pairs, `pipelines.prepare_data` runs from
nothing (--workers: every core): wall time, peak RSS of its process tree (the main
process and its tokenising workers, sampled every 0.1 s) and size on disk. For each
size in --startup_pairs, `pipelines.train` with configs/multi30k_en_de.cfg's model runs
5 updates on the prepared data (loss-only validation, no test translation): command to
exit, and peak RSS. --large_pairs is prepared
and trained the same way (the corpus TF's file cache refused beyond 10M elements).

With --baseline_revision, the steady-state training rate (`benchmarks.train_throughput`,
bfloat16, one warm-up epoch then --throughput_steps timed steps) of each preset in
--throughput_presets on Multi30k from the shards is measured beside the same benchmark
at that revision (text tokenised in-graph and cached: the path the shards replaced), in
a git worktree, in this run. Ends with one JSON line.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAW = os.path.join(ROOT, "convs2s_tf", "datasets", "multi30k", "raw")
CONFIG = os.path.join(ROOT, "configs", "multi30k_en_de.cfg")

flags.DEFINE_list("pairs", ["500000", "1500000", "4500000"], "Corpus sizes to prepare.")
flags.DEFINE_list("startup_pairs", ["500000", "4500000"], "Sizes to start training on.")
flags.DEFINE_integer("large_pairs", 12_000_000, "A corpus beyond TF's cache limit (0: skip).")
flags.DEFINE_list(
    "throughput_presets", ["multi30k_cpu", "iwslt_de_en"], "Presets of the rate comparison."
)
flags.DEFINE_string(
    "baseline_revision", None, "Git revision of the text path to compare rates with."
)
flags.DEFINE_integer("throughput_steps", 150, "Timed steps of each rate measurement.")
flags.DEFINE_string("work_dir", "/tmp/convs2s_data_scale", "Scratch directory (kept).")
flags.DEFINE_string("config", CONFIG, "Flagfile of the model and training of the start-up runs.")
FLAGS = flags.FLAGS


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
    """`benchmarks.train_throughput` of `preset` in `tree` on Multi30k in `data_dir`."""
    flagfile = os.path.join(FLAGS.work_dir, f"throughput_{os.path.basename(tree)}.cfg")
    with open(flagfile, "w") as f:
        f.write(f"--flagfile={os.path.join(tree, 'configs', 'multi30k_en_de.cfg')}\n")
        f.write(f"--data_dir={data_dir}\n")
    command = [
        sys.executable,
        "-m",
        "benchmarks.train_throughput",
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


def main(argv):
    del argv
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    result = {"cpu": _cpu_name(), "corpus": "Multi30k training pairs replicated"}
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
    print(json.dumps(result))


def _cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    app.run(main)
