"""Benchmarks a user runs on their own machine (`python -m benchmarks.NAME`), and what
they share: the CPU's description, child processes, request timing and text files.

Nothing here imports TensorFlow: a fresh process timed by a benchmark imports it itself.
"""

import os
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CPU_FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")


class CommandError(RuntimeError):
    """A child process failed or printed something other than expected."""


def cpu_description():
    """The CPU's model name, core count and the vector/matrix features that matter here
    (from /proc/cpuinfo)."""
    model, features = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    features = set(value.split())
    except OSError:
        pass
    present = " ".join(name for name in _CPU_FEATURES if name in features) or "no AVX2"
    return f"{model}, {os.cpu_count()} logical cores, {present}"


def child_env(**variables):
    """The environment of a child process of the project (TensorFlow's C++ logs quiet)."""
    return dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", **variables)


def run_timed(command, cwd=ROOT, env=None):
    """Runs `command`; returns `(wall seconds, stdout, stderr)`.

    Raises:
        CommandError: It failed (the end of its standard error in the message).
    """
    start = time.perf_counter()
    result = subprocess.run(
        command, cwd=cwd, env=env or child_env(), capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise CommandError(
            f"{' '.join(map(str, command[:4]))} ... failed (exit {result.returncode}):\n"
            f"{result.stderr[-3000:]}"
        )
    return seconds, result.stdout, result.stderr


def last_json(stdout):
    """The JSON line a benchmark (or its child) ends its standard output with."""
    import json

    return json.loads(stdout.strip().splitlines()[-1])


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def length_order(lengths):
    """Indices of `lengths` from the shortest to the longest, equal lengths in their first
    order (a stable sort, as fairseq's `ordered_indices`)."""
    return sorted(range(len(lengths)), key=lengths.__getitem__)


def in_corpus_order(translations, order):
    """`translations` of the sentences `order` lists, back in corpus order."""
    restored = [None] * len(order)
    for translation, index in zip(translations, order):
        restored[index] = translation
    return restored


def peak_rss_mb():
    """This process's peak resident memory so far, in MiB.

    Linux's `VmHWM`: `getrusage`'s `ru_maxrss` survives `exec`, so a child started by a
    large parent would report the parent's size.
    """
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024.0, 1)  # kibibytes
    except OSError:
        pass
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def request_milliseconds(translator, sentences):
    """Per-request latency of sending `sentences` one at a time, in ms."""
    times = []
    for sentence in sentences:
        start = time.perf_counter()
        translator.translate([sentence])
        times.append(1000.0 * (time.perf_counter() - start))
    return times


def translate_in_batches(translator, texts, batch_size):
    """The best translation of each of `texts`, sent `batch_size` at a time in the order
    given (the caller chooses the batches, e.g. sorted by length)."""
    translations = []
    for start in range(0, len(texts), batch_size):
        batch = translator.translate(texts[start : start + batch_size])
        translations += [hypotheses[0][0] for hypotheses in batch]
    return translations


def time_translator(translator, latency_input, throughput_input, output, batch_size):
    """A fresh process's measurement of a loaded translator (anything with
    `translate(texts) -> [[(text, score)]]`): every line of `latency_input` one request
    at a time (the first request included in the mean, and reported alone), the same
    lines again (warm), then `throughput_input` in batches of `batch_size`, the first pass
    counted; the batched translations go to `output`. Returns its figures."""
    first = request_milliseconds(translator, read_lines(latency_input))
    warm = request_milliseconds(translator, read_lines(latency_input))
    sentences = read_lines(throughput_input)
    start = time.perf_counter()
    write_lines(output, translate_in_batches(translator, sentences, batch_size))
    return {
        "first_request_ms": round(first[0], 2),
        "batch1_mean_ms": round(sum(first) / len(first), 2),
        "batch1_warm_mean_ms": round(sum(warm) / len(warm), 2),
        "batch_sentences_per_sec": round(len(sentences) / (time.perf_counter() - start), 2),
        "peak_rss_mb": peak_rss_mb(),
    }


def config_flags(*arguments):
    """Every pipeline flag, parsed from `arguments` alone (e.g. `--flagfile=...`): the
    settings of a flagfile as the pipelines read them, without the global flags."""
    from absl import flags

    from pipelines.flags import define_all_flags

    flag_values = flags.FlagValues()
    define_all_flags(flag_values)
    flag_values(["benchmark", *arguments])
    return flag_values


def model_config(name, vocab_size, flagfile):
    """The `ConvS2S` arguments of model `name`: `CONFIG_MODEL` is `flagfile`'s model (e.g.
    multi30k_cpu with the shared output projection), any other name a preset as it is."""
    from pipelines.flags.model import model_config_from_flags

    chosen = f"--flagfile={flagfile}" if name == CONFIG_MODEL else f"--preset={name}"
    return model_config_from_flags(vocab_size, config_flags(chosen))


def prepared_data(flagfile):
    """`flagfile`'s prepared data (`PreparedData`), prepared first if needed (a no-op
    when up to date), its relative --data_dir taken from the repository root."""
    from convs2s_tf.data.prepare import prepare_data
    from pipelines.flags.data import prepare_config_from_flags

    settings = config_flags(f"--flagfile={flagfile}")
    settings["data_dir"].value = os.path.join(ROOT, settings["data_dir"].value)
    return prepare_data(prepare_config_from_flags(settings)).data


# The model name that means "the model of the flagfile" (its preset with its overrides).
CONFIG_MODEL = "config"
FLAGFILE = os.path.join(ROOT, "configs", "multi30k_en_de.cfg")
