"""The default export as a fresh process meets it: load, first request, latency, throughput.

    python -m benchmarks.export_speed [--model_dir=runs/multi30k_en_de]
        [--saved_model=DIR] [--no_buckets] [--latency_sentences=100] [--batch_size=128]

Exports --model_dir with the defaults of `pipelines.export` (no speed flags) to a
temporary directory, unless --saved_model names an export. Then, each in a new Python
process that imports TensorFlow, loads the export with `open_saved_model`
(which replays its warm-up requests, as TF Serving does) and translates the test split
(test_2016_flickr, 1,000 sentences, beam 5 and the other search settings of the export):

* latency: the first --latency_sentences sentences one request at a time (the first
  request included in the mean and reported alone), then the same again (warm);
* throughput: every sentence in batches of --batch_size formed from the sentences sorted
  by length (as fairseq-generate forms them; the client sorts, the export serves), the
  first pass counted, then a second pass.

Load time is import-free (`tf.saved_model.load` plus the warm-up). Prints each figure and
ends with one JSON line. --no_buckets exports graph-mode searches alone (the export of
`--noxla_small_batches`), for comparison.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from benchmarks.fresh_saved_model import request_milliseconds
from benchmarks.run_files import length_order

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_string("saved_model", None, "Measure this export instead of a new one.")
flags.DEFINE_bool("no_buckets", False, "Export without compiled small-batch buckets.")
flags.DEFINE_integer("latency_sentences", 100, "Sentences sent one at a time.")
flags.DEFINE_integer("batch_size", 128, "Sentences per batch for throughput.")
flags.DEFINE_enum("measure", None, ["latency", "throughput"], "Internal: the child's part.")
flags.DEFINE_string("sentences_file", None, "Internal: the child's sentences.")
FLAGS = flags.FLAGS


def _load(path):
    import tensorflow_text  # noqa: F401

    from convs2s_tf.inference import open_saved_model

    start = time.perf_counter()
    translator = open_saved_model(path)
    return translator, time.perf_counter() - start


def _latency(translator, sentences):
    first = request_milliseconds(translator, sentences)
    warm = request_milliseconds(translator, sentences)
    return {
        "first_request_ms": round(first[0], 2),
        "batch1_mean_ms": round(sum(first) / len(first), 2),
        "batch1_warm_mean_ms": round(sum(warm) / len(warm), 2),
    }


def _throughput(translator, sentences, batch_size):
    order = length_order([len(sentence) for sentence in sentences])
    result = {}
    for name in ("first_pass", "second_pass"):
        start = time.perf_counter()
        for begin in range(0, len(order), batch_size):
            translator.translate([sentences[i] for i in order[begin : begin + batch_size]])
        result[f"{name}_sentences_per_sec"] = round(len(order) / (time.perf_counter() - start), 1)
    return result


def _child(path):
    with open(FLAGS.sentences_file, encoding="utf-8") as f:
        sentences = f.read().split("\n")[:-1]
    translator, seconds = _load(path)
    result = {"load_seconds": round(seconds, 2)}
    result["warmup_seconds"] = round(getattr(translator, "warmup_seconds", 0.0), 2)
    if FLAGS.measure == "latency":
        result.update(_latency(translator, sentences[: FLAGS.latency_sentences]))
    else:
        result.update(_throughput(translator, sentences, FLAGS.batch_size))
    print(json.dumps(result))


def _run_child(path, measure, sentences_file):
    command = [
        sys.executable,
        "-m",
        "benchmarks.export_speed",
        f"--saved_model={path}",
        f"--measure={measure}",
        f"--sentences_file={sentences_file}",
        f"--latency_sentences={FLAGS.latency_sentences}",
        f"--batch_size={FLAGS.batch_size}",
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    output = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return json.loads(output.stdout.strip().splitlines()[-1])


def _export(export_root):
    from convs2s_tf.decoding import SearchConfig
    from convs2s_tf.inference import load_inference_model

    loaded = load_inference_model(FLAGS.model_dir, search_config=SearchConfig())
    options = {"buckets": None} if FLAGS.no_buckets else {}
    start = time.perf_counter()
    version_dir = loaded.export(os.path.join(export_root, "export"), exporter_options=options)
    print(f"exported to {version_dir} in {time.perf_counter() - start:.1f} s", flush=True)
    return version_dir, _run_data_dir(loaded.run_config)


def _run_data_dir(run_config):
    from convs2s_tf.runs import RunDirectory

    return RunDirectory(FLAGS.model_dir).data_dir(run_config)


def main(argv):
    del argv
    if FLAGS.measure:
        return _child(FLAGS.saved_model)
    from convs2s_tf.data.prepare import PreparedData
    from convs2s_tf.data.text_files import read_lines
    from convs2s_tf.runs import RunDirectory

    with tempfile.TemporaryDirectory() as scratch:
        if FLAGS.saved_model:
            path = FLAGS.saved_model
            data_dir = _run_data_dir(RunDirectory(FLAGS.model_dir).read_config())
        else:
            path, data_dir = _export(scratch)
        sentences = read_lines(PreparedData.load(data_dir).split_paths("test")[0])
        sentences_file = os.path.join(scratch, "test.txt")
        with open(sentences_file, "w", encoding="utf-8") as f:
            f.writelines(sentence + "\n" for sentence in sentences)
        results = {"sentences": len(sentences), "buckets": not FLAGS.no_buckets}
        for measure in ("latency", "throughput"):
            measured = _run_child(path, measure, sentences_file)
            print(f"{measure} (fresh process): {measured}", flush=True)
            results.update({f"{measure}_{key}": value for key, value in measured.items()})
    print(json.dumps(results))


if __name__ == "__main__":
    app.run(main)
