"""How long deleting a tf.data iterator at an epoch end takes, with model-based autotuning
(`tf.data.Options().autotune.enabled`) on and off, and what an epoch boundary costs when
one iterator runs the whole run instead (docs/input-pipeline-notes.md).

    python -m benchmarks.iterator_deletion            # about 9 minutes on 2 cores
    python -m benchmarks.iterator_deletion --quick    # about 20 seconds

The pipeline is shaped like a training one, on synthetic data: `Dataset.range` ->
variable-length int32 vectors -> `bucket_by_sequence_length` padded batches -> a
compute-bound `map(num_parallel_calls=AUTOTUNE)` (a few matmuls per batch) ->
`prefetch(AUTOTUNE)`. Short epochs are read as fast as the pipeline goes, their batch
count calibrated to last about --short_epoch_seconds; long ones (--long_epoch_seconds)
have --long_epoch_batches batches, each taken a training step's time after the previous.

Per-epoch iterators: each trial creates an iterator, reads one epoch (fully, or half of
it: "partial"), then times `del iterator` plus `gc.collect()`. Autotuning's model thread
re-arms its wait at 10 ms and doubles it after every optimisation up to 60 s, so each
trial also prints the wait a lost cancellation wake-up would sleep out (the time to the
next optimisation at the iterator's age), and whether the model thread did go back to
sleep while the iterator was being deleted: TensorFlow's own log line of
`Model::OptimizeLoop` ("Waiting for N ms", enabled with TF_CPP_VMODULE=model=2) is read
from stderr, which is captured to a temporary file for the run (its warnings and errors
are echoed at the end).

One iterator: `Dataset.range(epochs).flat_map(epoch_dataset)`, timing the gap between
the last batch of an epoch and the first of the next, against the median gap inside
epochs, and the deletion of that iterator at the end.

One line per trial, then one JSON line of the results.
"""

import gc
import json
import os
import re
import statistics
import sys
import tempfile
import time
import weakref

_TF_LOG_LINE = re.compile(r"^([IWEF])\d{4} ")
_USER_MIN_LOG_LEVEL = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") or 0)


class StderrLog:
    """Redirects file descriptor 2 (TensorFlow's C++ log) to a temporary file; `since`
    reads what was written after a mark."""

    def __init__(self):
        self._fd, self.path = tempfile.mkstemp(prefix="iterator_deletion_", suffix=".log")
        sys.stderr.flush()
        self._saved = os.dup(2)
        os.dup2(self._fd, 2)

    def mark(self) -> int:
        sys.stderr.flush()
        return os.path.getsize(self.path)

    def since(self, mark: int) -> str:
        sys.stderr.flush()
        with open(self.path, encoding="utf-8", errors="replace") as f:
            f.seek(mark)
            return f.read()

    def close(self):
        """Restores stderr and echoes the log but for INFO lines below the level the
        user's TF_CPP_MIN_LOG_LEVEL shows."""
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        os.close(self._fd)
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                match = _TF_LOG_LINE.match(line)
                if match and "IWEF".index(match.group(1)) < _USER_MIN_LOG_LEVEL:
                    continue
                if match and match.group(1) == "I" and ("model.cc" in line or "model.h" in line):
                    continue
                sys.stderr.write(line)
        os.remove(self.path)


_LOG = None
if __name__ == "__main__":
    # Model::OptimizeLoop logs its waits at VLOG(2), and VLOG lines are INFO lines; the
    # log goes to a file from before TensorFlow's first line.
    os.environ["TF_CPP_VMODULE"] = "model=2"
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    _LOG = StderrLog()

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

flags.DEFINE_bool(
    "quick", False, "Smallest settings (about 20 s): 1 s epochs, one trial each, a 2 s paced epoch."
)
flags.DEFINE_float("short_epoch_seconds", 3.5, "Length of a short epoch.")
flags.DEFINE_integer("short_trials", 5, "Trials of each short-epoch variant.")
flags.DEFINE_list(
    "long_epoch_seconds",
    ["42", "90"],
    "Lengths of the paced epochs (--long_epoch_batches batches, each a training step's time "
    "after the previous one): --long_trials trials each with autotuning on; the first also "
    "one with it off. 42 s and 90 s fall 40 s and 52 s before autotuning's next optimisation.",
)
flags.DEFINE_integer("long_trials", 2, "Trials of each paced epoch length, autotuning on.")
flags.DEFINE_integer("long_epoch_batches", 500, "Batches of a paced epoch.")
flags.DEFINE_integer("flat_map_epochs", 3, "Epochs of the one-iterator run.")
flags.DEFINE_float("flat_map_epoch_seconds", 15.0, "Length of an epoch of the one-iterator run.")
flags.DEFINE_integer("matmul_size", 256, "Side of the square matrices each batch multiplies.")
FLAGS = flags.FLAGS

BATCH_SENTENCES = 64
BUCKET_BOUNDARIES = [10, 20, 30, 40, 50]
# Model::OptimizeLoop (tensorflow/core/framework/model.{h,cc}): the wait before the
# k-th optimisation is min(10 ms * 2**k, 60 s), the first one running at once.
_PERIOD_MIN_MS = 10
_PERIOD_MAX_MS = 60_000
_WAITING = re.compile(r"model\.cc:\d+\] Waiting for (\d+) ms")
_OPTIMIZED = re.compile(r"model\.cc:\d+\] Optimized for")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return "unknown"


def lost_wake_up_wait(age_seconds: float) -> float:
    """Seconds from `age_seconds` (since the model thread started) to the next
    optimisation: what the thread sleeps if it misses its cancellation wake-up."""
    next_ms, period_ms, age_ms = 0, _PERIOD_MIN_MS, age_seconds * 1000
    while next_ms <= age_ms:
        period_ms = min(period_ms * 2, _PERIOD_MAX_MS)
        next_ms += period_ms
    return (next_ms - age_ms) / 1000


def rewaits(log_text: str) -> tuple[int, int]:
    """(waits the model thread started that no optimisation preceded, longest in ms)."""
    waits = [int(m.group(1)) for m in _WAITING.finditer(log_text)]
    optimisations = len(_OPTIMIZED.findall(log_text))
    return max(0, len(waits) - optimisations), max(waits, default=0)


def options(autotune: bool, cpu_budget: int = 0) -> tf.data.Options:
    result = tf.data.Options()
    result.autotune.enabled = autotune
    if cpu_budget:
        result.autotune.cpu_budget = cpu_budget
    return result


def epoch_dataset(epoch, batches: int | None, matmul_size: int) -> tf.data.Dataset:
    """One epoch: about `batches` padded batches (endless if None), each element a dict
    with the batch, the result of the batch's matmuls and the epoch number."""
    epoch = tf.cast(epoch, tf.int64)
    sentences = tf.data.Dataset.range(2**62 if batches is None else batches * BATCH_SENTENCES)

    def sentence(index):
        # Lengths 3..62 in a scrambled order that changes with the epoch.
        length = (index * 7919 + epoch * 104729) % 60 + 3
        return tf.range(tf.cast(length, tf.int32), dtype=tf.int32)

    def compute(tokens):
        seed = tf.stack([tf.reduce_sum(tf.cast(tokens, tf.int64)), epoch])
        matrix = tf.random.stateless_normal([matmul_size, matmul_size], seed=seed)
        for _ in range(3):
            matrix = tf.matmul(matrix, matrix) / matmul_size
        return {"tokens": tokens, "work": tf.reduce_sum(matrix), "epoch": epoch}

    dataset = sentences.map(sentence).bucket_by_sequence_length(
        lambda tokens: tf.shape(tokens)[0],
        bucket_boundaries=BUCKET_BOUNDARIES,
        bucket_batch_sizes=[BATCH_SENTENCES] * (len(BUCKET_BOUNDARIES) + 1),
    )
    return dataset.map(compute, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def calibrate(dataset_options: tf.data.Options, seconds: float, matmul_size: int) -> float:
    """Batches per second of the endless pipeline, after its first batch."""
    iterator = iter(epoch_dataset(0, None, matmul_size).with_options(dataset_options))
    next(iterator)
    start, batches = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        next(iterator)
        batches += 1
    rate = batches / (time.perf_counter() - start)
    del iterator
    gc.collect()
    return rate


def delete(holder: list, log: StderrLog) -> dict:
    """Times dropping the iterator `holder` holds (its only reference: an argument would
    stay referenced by the caller until the call returns) and a gc pass."""
    alive = weakref.ref(holder[0])
    mark = log.mark()
    start = time.perf_counter()
    holder.clear()
    deleted = time.perf_counter()
    freed_by_del = alive() is None
    gc.collect()
    end = time.perf_counter()
    lost, longest_ms = rewaits(log.since(mark))
    return {
        "delete_seconds": round(end - start, 3),
        "del_seconds": round(deleted - start, 3),
        "gc_seconds": round(end - deleted, 3),
        "freed_by_del": freed_by_del,
        "lost_wake_ups": lost,
        "rewait_ms": longest_ms,
    }


def per_epoch_trial(
    dataset: tf.data.Dataset, partial: bool, batches: int, step_seconds: float, log: StderrLog
):
    """One epoch read by a for loop, as a training loop reads it; with `step_seconds`,
    batch i is taken no earlier than i steps after the start (a training step's time)."""
    start = time.perf_counter()
    holder = [iter(dataset)]
    first_batch, read = 0.0, 0
    for read, _ in enumerate(holder[0], 1):
        if read == 1:
            first_batch = time.perf_counter() - start
        if partial and read >= batches // 2:
            break
        if step_seconds:
            time.sleep(max(0.0, start + read * step_seconds - time.perf_counter()))
    age = time.perf_counter() - start
    result = {
        "batches": read,
        "epoch_seconds": round(age, 2),
        "first_batch_seconds": round(first_batch, 3),
        "lost_wake_up_wait_seconds": round(lost_wake_up_wait(age), 2),
    }
    result.update(delete(holder, log))
    return result


def run_per_epoch(name, autotune, dataset_options, epoch_seconds, trials, partial, rate, log):
    """Trials of one variant. A rate of None paces the epoch with training steps of
    epoch_seconds / --long_epoch_batches; else the epoch reads as fast as it can
    `rate * epoch_seconds` batches."""
    if rate is None:
        batches = FLAGS.long_epoch_batches
        # bucket_by_sequence_length adds up to one partial batch per bucket.
        step_seconds = epoch_seconds / (batches + len(BUCKET_BOUNDARIES) + 1)
    else:
        batches, step_seconds = max(2, round(rate * epoch_seconds)), 0.0
    dataset = epoch_dataset(0, batches, FLAGS.matmul_size).with_options(dataset_options)
    results = []
    for trial in range(trials):
        result = per_epoch_trial(dataset, partial, batches, step_seconds, log)
        results.append(result)
        print(
            f"{name} trial {trial}: {result['batches']} batches in {result['epoch_seconds']} s, "
            f"delete {result['delete_seconds']} s (del {result['del_seconds']}, "
            f"gc {result['gc_seconds']}, freed by del: {result['freed_by_del']}); "
            + (
                f"model thread went back to sleep: {result['lost_wake_ups']} "
                f"({result['rewait_ms']} ms); a lost wake-up would wait "
                f"{result['lost_wake_up_wait_seconds']} s"
                if autotune
                else "no model thread"
            ),
            flush=True,
        )
    deletes = [r["delete_seconds"] for r in results]
    return {
        "epoch_seconds": epoch_seconds,
        "partial": partial,
        "delete_seconds": deletes,
        "max_delete_seconds": max(deletes),
        "median_delete_seconds": statistics.median(deletes),
        "trials_with_lost_wake_up": sum(1 for r in results if r["lost_wake_ups"]),
        "trials_freed_by_del": sum(1 for r in results if r["freed_by_del"]),
        "trials": results,
    }


def run_flat_map(epochs, epoch_seconds, rate, log):
    batches = max(2, round(rate * epoch_seconds))
    dataset = (
        tf.data.Dataset.range(epochs)
        .flat_map(lambda epoch: epoch_dataset(epoch, batches, FLAGS.matmul_size))
        .prefetch(tf.data.AUTOTUNE)
        .with_options(options(True))
    )
    start = time.perf_counter()
    holder = [iter(dataset)]
    times, epochs_seen = [], []
    for element in holder[0]:
        times.append(time.perf_counter())
        epochs_seen.append(int(element["epoch"]))
    del element
    age = time.perf_counter() - start
    boundaries, inside = [], []
    for i in range(1, len(times)):
        gap = times[i] - times[i - 1]
        (boundaries if epochs_seen[i] != epochs_seen[i - 1] else inside).append(gap)
    result = {
        "epochs": epochs,
        "batches": len(times),
        "run_seconds": round(age, 2),
        "boundary_gap_seconds": [round(gap, 4) for gap in boundaries],
        "median_gap_inside_epochs_seconds": round(statistics.median(inside), 4),
        "lost_wake_up_wait_seconds": round(lost_wake_up_wait(age), 2),
    }
    result.update(delete(holder, log))
    print(
        f"one iterator, {epochs} epochs: {len(times)} batches in {result['run_seconds']} s; "
        f"epoch boundary gaps {result['boundary_gap_seconds']} s vs median gap "
        f"{result['median_gap_inside_epochs_seconds']} s inside epochs; delete at the end "
        f"{result['delete_seconds']} s (freed by del: {result['freed_by_del']}); model thread "
        f"went back to sleep: {result['lost_wake_ups']} ({result['rewait_ms']} ms); a lost "
        f"wake-up would wait {result['lost_wake_up_wait_seconds']} s",
        flush=True,
    )
    return result


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if FLAGS.quick:
        short_seconds, short_trials, long_seconds, long_trials = 1.0, 1, [2.0], 1
        flat_epochs, flat_seconds, calibration_seconds = 2, 1.0, 0.5
    else:
        short_seconds, short_trials = FLAGS.short_epoch_seconds, FLAGS.short_trials
        long_seconds = [float(seconds) for seconds in FLAGS.long_epoch_seconds]
        long_trials = FLAGS.long_trials
        flat_epochs, flat_seconds = FLAGS.flat_map_epochs, FLAGS.flat_map_epoch_seconds
        calibration_seconds = 2.0
    log = _LOG or StderrLog()
    try:
        variants = {
            "autotune": options(True),
            "no_autotune": options(False),
            "autotune_cpu_budget_1": options(True, cpu_budget=1),
        }
        rates = {
            name: calibrate(value, calibration_seconds, FLAGS.matmul_size)
            for name, value in variants.items()
        }
        print(f"batches/s: { {name: round(rate, 1) for name, rate in rates.items()} }")
        start = time.perf_counter()
        gc.collect()
        gc_seconds = round(time.perf_counter() - start, 3)
        print(f"gc.collect() with no iterator to free: {gc_seconds} s")
        runs = {}
        for name, partial in [
            ("autotune", False),
            ("autotune", True),
            ("no_autotune", False),
            ("no_autotune", True),
            ("autotune_cpu_budget_1", False),
        ]:
            key = f"{name}_{'partial' if partial else 'full'}_{short_seconds:g}s"
            runs[key] = run_per_epoch(
                key,
                name != "no_autotune",
                variants[name],
                short_seconds,
                short_trials,
                partial,
                rates[name],
                log,
            )
        for index, seconds in enumerate(long_seconds):
            for name, trials in [("autotune", long_trials)] + (
                [("no_autotune", 1)] if index == 0 else []
            ):
                key = f"{name}_paced_{seconds:g}s"
                runs[key] = run_per_epoch(
                    key, name != "no_autotune", variants[name], seconds, trials, False, None, log
                )
        flat_map = run_flat_map(flat_epochs, flat_seconds, rates["autotune"], log)
    finally:
        log.close()
    autotune_runs = [run for key, run in runs.items() if key.startswith("autotune")]
    other_runs = [run for key, run in runs.items() if key.startswith("no_autotune")]
    print(
        json.dumps(
            {
                "cpu": cpu_model(),
                "tensorflow": tf.__version__,
                "quick": FLAGS.quick,
                "gc_seconds_without_iterator": gc_seconds,
                "max_delete_seconds_autotune": max(r["max_delete_seconds"] for r in autotune_runs),
                "max_delete_seconds_no_autotune": max(r["max_delete_seconds"] for r in other_runs),
                "trials_with_lost_wake_up_autotune": sum(
                    r["trials_with_lost_wake_up"] for r in autotune_runs
                ),
                "trials_autotune": sum(len(r["trials"]) for r in autotune_runs),
                "flat_map_max_boundary_gap_seconds": max(
                    flat_map["boundary_gap_seconds"], default=0.0
                ),
                "flat_map_delete_seconds": flat_map["delete_seconds"],
                "runs": runs,
                "flat_map": flat_map,
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
