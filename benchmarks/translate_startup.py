"""Whole-process time of `pipelines.translate`: one sentence and the 1,000 test lines.

    python -m benchmarks.translate_startup [--model_dir=runs/multi30k_en_de]
        [--source=data/multi30k_en_de/test.en] [--repeats=3] [--reference_seconds=SECONDS]

Each figure is the median wall time of --repeats fresh processes, as a user meets them:
`python -m pipelines.translate --model_dir=RUN --input=FILE --output=FILE`. The
breakdown comes from the differences between runs that stop earlier:

* import: `python -c "import pipelines.translate"` (Python's start-up included);
* load: translate of an empty input (flags, model built and restored) minus import;
* translate: translate of one sentence, and of the whole --source, minus the empty run
  (the first translation traces the search and optimises its graph).

Then, in one process, the same phases timed from inside (import, load, first
translation, a second one, the whole --source, with the command's threads and batches
in flight), which splits the first translation's cost from the search itself. With
--reference_seconds (fairseq-interactive on the same model and lines, from
`benchmarks.compare_fairseq`), the ratio to it. The last line is JSON.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_string(
    "source",
    os.path.join(ROOT, "data", "multi30k_en_de", "test.en"),
    "Lines to translate (default: the prepared test_2016_flickr English side).",
)
flags.DEFINE_integer("repeats", 3, "Fresh processes per figure (the median is reported).")
flags.DEFINE_float(
    "reference_seconds",
    None,
    "fairseq-interactive's wall time on the same model and --source, to compare with.",
)
flags.DEFINE_list(
    "translate_flags", [], "Further pipelines.translate flags, e.g. --batch_size=128."
)
FLAGS = flags.FLAGS

# Timed from inside one process: the phases a translation goes through.
_PHASES = """
import json, sys, time
start = time.perf_counter()
import pipelines.translate
from convs2s_tf.inference import open_translator
imported = time.perf_counter()
in_flight = pipelines.translate.search_one_batch_per_core()  # as the command does
translator = open_translator(model_dir=sys.argv[1])
loaded = time.perf_counter()
with open(sys.argv[2], encoding="utf-8") as f:
    lines = f.read().split("\\n")[:-1]
translator.translate(lines[:1])
first = time.perf_counter()
translator.translate(lines[1:2])
second = time.perf_counter()
translator.translate_all(lines, in_flight=in_flight)
done = time.perf_counter()
print(json.dumps({
    "import": imported - start, "load": loaded - imported, "first_translation": first - loaded,
    "second_translation": second - first, "all_lines": done - second,
}))
"""


def _wall_seconds(arguments, stdin=None):
    """Wall time of `python ARGUMENTS...` from the repository root; stdout."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, *arguments],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(arguments)} failed:\n{result.stderr[-3000:]}")
    return seconds, result.stdout


def _median_seconds(arguments):
    return statistics.median(_wall_seconds(arguments)[0] for _ in range(FLAGS.repeats))


def _translate_seconds(input_path, work_dir):
    output = os.path.join(work_dir, "output.txt")
    return _median_seconds(
        [
            "-m",
            "pipelines.translate",
            f"--model_dir={FLAGS.model_dir}",
            f"--input={input_path}",
            f"--output={output}",
            *FLAGS.translate_flags,
        ]
    )


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def whole_process_seconds(lines, work_dir):
    """{name: median wall seconds} of the import, an empty input, one line and all."""
    inputs = {
        "empty": _write_lines(os.path.join(work_dir, "empty.txt"), []),
        "one_sentence": _write_lines(os.path.join(work_dir, "one.txt"), lines[:1]),
        "all_lines": _write_lines(os.path.join(work_dir, "all.txt"), lines),
    }
    seconds = {"import": _median_seconds(["-c", "import pipelines.translate"])}
    for name, path in inputs.items():
        seconds[name] = _translate_seconds(path, work_dir)
    return seconds


def main(argv):
    del argv
    with open(FLAGS.source, encoding="utf-8") as f:
        lines = f.read().split("\n")[:-1]
    with tempfile.TemporaryDirectory() as work_dir:
        whole = whole_process_seconds(lines, work_dir)
    _, stdout = _wall_seconds(["-c", _PHASES, FLAGS.model_dir, FLAGS.source])
    phases = json.loads(stdout.strip().splitlines()[-1])
    results = {
        "sentences": len(lines),
        "repeats": FLAGS.repeats,
        "one_sentence_seconds": round(whole["one_sentence"], 2),
        "all_lines_seconds": round(whole["all_lines"], 2),
        "breakdown": {
            "import": round(whole["import"], 2),
            "load": round(whole["empty"] - whole["import"], 2),
            "translate_one_sentence": round(whole["one_sentence"] - whole["empty"], 2),
            "translate_all_lines": round(whole["all_lines"] - whole["empty"], 2),
        },
        "in_process": {name: round(value, 2) for name, value in phases.items()},
    }
    print(f"pipelines.translate --model_dir={FLAGS.model_dir}, median of {FLAGS.repeats}:")
    print(f"  one sentence      {results['one_sentence_seconds']:6.2f} s")
    print(f"  {len(lines):,} lines      {results['all_lines_seconds']:6.2f} s")
    for name, value in results["breakdown"].items():
        print(f"    {name:<24}{value:6.2f} s")
    print("  in one process: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    if FLAGS.reference_seconds:
        ratio = FLAGS.reference_seconds / whole["all_lines"]
        results.update(reference_seconds=FLAGS.reference_seconds, speedup=round(ratio, 2))
        print(f"  fairseq-interactive {FLAGS.reference_seconds:.2f} s: {ratio:.2f} times faster")
    print(json.dumps(results))


if __name__ == "__main__":
    app.run(main)
