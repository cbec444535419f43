"""Times an export as a fresh process meets it (run by `benchmarks.compare_fairseq`).

    python -m benchmarks.fresh_saved_model --saved_model=DIR --latency_input=FIRST.txt \\
        --throughput_input=SORTED.txt --output=TRANSLATIONS.txt [--batch_size=128]

In one new process, in this order: the imports (TensorFlow, tensorflow-text, the
project's translator), the load (`open_saved_model`), every line of
--latency_input one request at a time (the first request included in the mean, and
reported alone), the same lines again (warm), then --throughput_input in batches of
--batch_size (the first pass, compilation and all, counted). Writes the batched
translations to --output, one per line, and prints one JSON line (with the process's
peak resident memory).
"""

import time

_START = time.perf_counter()

import json  # noqa: E402

from absl import app, flags  # noqa: E402

from convs2s_tf.data.text_files import read_lines  # noqa: E402

FLAGS = flags.FLAGS


def define_flags():
    """Defines the flags (when run as a program: benchmarks.compare_fairseq imports
    `translate_in_batches` from here and has flags of its own)."""
    flags.DEFINE_string("saved_model", None, "Export directory (base or version).", required=True)
    flags.DEFINE_string("latency_input", None, "Sentences sent one at a time.", required=True)
    flags.DEFINE_string("throughput_input", None, "Sentences sent in batches.", required=True)
    flags.DEFINE_string("output", None, "Where the batched translations go.", required=True)
    flags.DEFINE_integer("batch_size", 128, "Sentences per batched request.")


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


def time_translator(translator, started, imported, loaded):
    """Runs the measurement on a loaded `translator` (the module docstring's, from
    --latency_input, --throughput_input, --batch_size; translations to --output); its
    figures, given when the process started and when its imports and the load ended
    (`time.perf_counter()`)."""
    first = request_milliseconds(translator, read_lines(FLAGS.latency_input))
    warm = request_milliseconds(translator, read_lines(FLAGS.latency_input))
    sentences = read_lines(FLAGS.throughput_input)
    start = time.perf_counter()
    translations = translate_in_batches(translator, sentences, FLAGS.batch_size)
    batched_seconds = time.perf_counter() - start
    with open(FLAGS.output, "w", encoding="utf-8") as f:
        f.writelines(translation + "\n" for translation in translations)
    return {
        "import_seconds": round(imported - started, 3),
        "load_seconds": round(loaded - imported, 3),
        "first_request_ms": round(first[0], 2),
        "batch1_mean_ms": round(sum(first) / len(first), 2),
        "batch1_warm_mean_ms": round(sum(warm) / len(warm), 2),
        "batch_sentences_per_sec": round(len(sentences) / batched_seconds, 2),
        "peak_rss_mb": peak_rss_mb(),
    }


def main(argv):
    del argv
    import tensorflow  # noqa: F401
    import tensorflow_text  # noqa: F401

    from convs2s_tf.inference import open_saved_model

    imported = time.perf_counter()
    translator = open_saved_model(FLAGS.saved_model)
    print(json.dumps(time_translator(translator, _START, imported, time.perf_counter())))


if __name__ == "__main__":
    define_flags()
    app.run(main)
