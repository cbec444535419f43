"""Benchmarks a user runs on their own machine (`python -m benchmarks.NAME`), and what
they share: the CPU's description, child processes, a test split's files, request timing
and the settings of a flagfile. Nothing here imports TensorFlow at import time: a fresh
process timed by a benchmark imports it itself.
"""

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The model name that means "the model of the flagfile" (its preset with its overrides).
CONFIG_MODEL = "config"
FLAGFILE = os.path.join(ROOT, "configs", "multi30k_en_de.cfg")
# The interpreter command of the benchmarks' child processes: this interpreter (the test
# suite points it at its fork server, which starts them with TensorFlow imported).
PYTHON = (sys.executable,)
# The share of a time budget at the shrunk learning rate (the default config's).
COOLDOWN_SHARE = 5.0 / 58.0
_CPU_FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")


class CommandError(RuntimeError):
    """A child process failed or printed something other than expected."""


def stage_json(path, make):
    """The JSON object in `path`, made by `make()` and written there first if missing
    (atomically: a killed stage leaves no file, and a re-run makes it again)."""
    from convs2s_tf.atomic_files import write_text_atomically

    if not os.path.isfile(path):
        write_text_atomically(path, [json.dumps(make())])
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main(define_flags, run):
    """Runs a benchmark module as a program: `define_flags()`, then `run(flags.FLAGS)`."""
    from absl import app, flags

    define_flags()
    app.run(lambda argv: run(flags.FLAGS))


def cpu_description():
    """The CPU's model name, core count and the vector/matrix features that matter here."""
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
    defaults = dict(PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")
    return dict(os.environ, **dict(defaults, **variables))


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
        raise command_failed(command, result.returncode, result.stderr)
    return seconds, result.stdout, result.stderr


def command_failed(command, status, output):
    """The `CommandError` of `command` ended with exit `status`, the end of its `output`
    in the message."""
    return CommandError(
        f"{' '.join(map(str, command[:4]))} ... failed (exit {status}):\n{output[-3000:]}"
    )


def python(*arguments):
    """The command `python ARGUMENTS...` of a child process (`PYTHON`)."""
    return [*PYTHON, *map(str, arguments)]


def training_budget(minutes):
    """`pipelines.train`'s time budget of `minutes`, {flag: value}: the last `COOLDOWN_SHARE`
    of it at the shrunk learning rate, as the default config's 5 of 58 minutes."""
    return {
        "max_train_minutes": minutes,
        "anneal_final_minutes": round(minutes * COOLDOWN_SHARE, 2),
    }


def run_python(*arguments):
    """`run_timed` of `python ARGUMENTS...` (`PYTHON`) from the repository root."""
    return run_timed(python(*arguments))


def export_seconds(model_dir, export_dir, *arguments):
    """Runs `pipelines.export` of the run in `model_dir` (more flags: `arguments`) into
    `export_dir`; returns its wall seconds."""
    export = ("-m", "pipelines.export", f"--model_dir={model_dir}", f"--export_dir={export_dir}")
    return run_python(*export, *arguments)[0]


def last_json(stdout):
    """The JSON line a benchmark (or its child) ends its standard output with."""
    return json.loads(stdout.strip().splitlines()[-1])


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def directory_bytes(path):
    """The size of the files under `path`."""
    return sum(
        os.path.getsize(os.path.join(folder, name))
        for folder, _, names in os.walk(path)
        for name in names
    )


def in_corpus_order(translations, order):
    """`translations` of the sentences `order` lists, back in corpus order."""
    return [translation for _, translation in sorted(zip(order, translations))]


def run_prepared_data(model_dir, data_dir=None):
    """The `PreparedData` the run in `model_dir` trained on (or that in `data_dir`)."""
    from absl import app

    from convs2s_tf.data.data_directory import PreparedData
    from convs2s_tf.runs import RunDirectory

    run = RunDirectory(model_dir)
    data_dir = data_dir or run.data_dir(run.read_config())
    if not data_dir:
        raise app.UsageError(f"{model_dir} names no prepared data directory: give --data_dir.")
    return PreparedData.load(data_dir)


class TestSplit:
    """A split's sources and references (the first `limit`; 0: all), and the files every
    translator reads: `first_path` (the first `latency_sentences`, sent one at a time) and
    `sorted_path` (every sentence, shortest first by `length`, a stable sort as fairseq's
    `ordered_indices`), whose translations `scores` puts back in corpus order."""

    def __init__(self, prepared, work_dir, limit=0, latency_sentences=0, length=len, split="test"):
        paths = prepared.split_paths(split)
        self.sources, self.references = (read_lines(path)[: limit or None] for path in paths)
        self.order = sorted(range(len(self.sources)), key=lambda i: length(self.sources[i]))
        self.sorted = [self.sources[i] for i in self.order]
        self.first = self.sources[: latency_sentences or None]
        self.first_path = write_lines(os.path.join(work_dir, "first.txt"), self.first)
        self.sorted_path = write_lines(os.path.join(work_dir, "sorted.txt"), self.sorted)

    def scores(self, sorted_translations):
        """BLEU, lowercased `intl` BLEU and chrF of translations of `sorted`, rounded."""
        from convs2s_tf.evaluation import corpus_scores

        scores = corpus_scores(in_corpus_order(sorted_translations, self.order), self.references)
        return {key: round(scores[key], 2) for key in ("bleu", "bleu_lowercase_intl", "chrf")}


def peak_rss_mb():
    """This process's peak resident memory so far, in MiB (Linux's `VmHWM`: `getrusage`'s
    `ru_maxrss` survives `exec`, so a child of a large parent would report the parent's)."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024.0, 1)  # kibibytes
    except OSError:
        pass
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


class TreeMemory:
    """Samples the resident memory (bytes) of process `pid` and its children every `every`
    seconds on a thread into `samples`, until `stop()`."""

    def __init__(self, pid, every=0.1):
        import threading

        self.samples, self._stopped = [], threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(pid, every), daemon=True)
        self._thread.start()

    def _sample(self, pid, every):
        import psutil

        while True:
            try:
                tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
                self.samples.append(sum(process.memory_info().rss for process in tree))
            except psutil.Error:
                pass
            if self._stopped.wait(every):
                return

    def stop(self):
        self._stopped.set()
        self._thread.join()
        return self


def request_milliseconds(translator, sentences):
    """Per-request latency of sending `sentences` one at a time, in ms."""
    times = []
    for sentence in sentences:
        start = time.perf_counter()
        translator.translate([sentence])
        times.append(1000.0 * (time.perf_counter() - start))
    return times


def translate_in_batches(translator, texts, batch_size):
    """The best translation of each of `texts`, sent `batch_size` at a time in this order."""
    translations = []
    for start in range(0, len(texts), batch_size):
        batch = translator.translate(texts[start : start + batch_size])
        translations += [hypotheses[0][0] for hypotheses in batch]
    return translations


def define_child_flags(flag_values):
    """The flags of a benchmark's fresh process timing one translator."""
    from absl import flags

    define = {"flag_values": flag_values}
    flags.DEFINE_string("latency_input", None, "The child's sentences sent one a time.", **define)
    flags.DEFINE_string("throughput_input", None, "The child's batched sentences.", **define)
    flags.DEFINE_string("output", None, "Where the child writes its translations.", **define)


def child_command(module, split, output, batch_size, *arguments):
    """The fresh process of benchmark `module` (its child flags `arguments`) timing one
    translator on `split`'s files; its last stdout line: `time_fresh_process`'s figures."""
    command = python("-m", module, f"--latency_input={split.first_path}")
    command += [f"--throughput_input={split.sorted_path}", f"--output={output}"]
    return command + [f"--batch_size={batch_size}", *arguments]


def time_fresh_process(load, options, process_start):
    """A fresh process's figures of the translator `load()` returns (anything with
    `translate(texts) -> [[(text, score)]]`): import and load seconds, every line of
    --latency_input one request at a time (the first included in the mean, and alone),
    the same again warm, then --throughput_input in batches of --batch_size (the first
    pass), its translations written to --output. Returns the translator and figures."""
    imported = time.perf_counter()
    translator = load()
    loaded = time.perf_counter()
    first = request_milliseconds(translator, read_lines(options.latency_input))
    warm = request_milliseconds(translator, read_lines(options.latency_input))
    sentences = read_lines(options.throughput_input)
    start = time.perf_counter()
    write_lines(options.output, translate_in_batches(translator, sentences, options.batch_size))
    return translator, {
        "import_seconds": round(imported - process_start, 3),
        "load_seconds": round(loaded - imported, 3),
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
