"""Times a translator over a file's batches as `pipelines.translate` searches them: one
batch per core, plus one in flight (run by `benchmarks.floor_share`).

    python -m benchmarks.file_batches --model_dir=RUN [--saved_model=DIR] \\
        [--batch_size=128] [--sentences=N] [--output=TRANSLATIONS.txt]

In one new process: `search_one_batch_per_core` first (each search on one core of
TensorFlow's intra-op threads; it must precede TensorFlow's first operation), then the
in-process translator of the run (or the export --saved_model, loaded with its warm-up as
TF Serving loads it, which serves concurrent requests the same way with
`--tensorflow_intra_op_parallelism=1`). Each translator first translates one sentence and
the longest batch, untimed, as `floor_share` does; then the timed pass: the run's test
sentences sorted by length (`run_files.length_order`) in consecutive batches of
--batch_size, with `map_in_flight` keeping one batch per core plus one in flight. Before
it, a pass of lone requests: the same batches one at a time, each searched as one search
of its rows per core (`SearchConfig.parts`), as a lone client of TF Serving is served.
Writes the file pass's translations to --output in that sorted order (the lone
requests' to --output with `.requests` appended) and prints one JSON line.
"""

import json
import os
import time

from absl import app, flags

from benchmarks.run_files import ROOT, length_order, test_sentences

flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_string("saved_model", None, "Time this export instead of the run's checkpoint.")
flags.DEFINE_integer("batch_size", 128, "Sentences per batch.", lower_bound=1)
flags.DEFINE_integer("sentences", 0, "Use only the first N test sentences (0: all).")
flags.DEFINE_string("output", None, "Where the translations go, in length order.")
FLAGS = flags.FLAGS


def time_file_batches(translator, ordered, batch_size, in_flight):
    """`(sentences/s, translations)` of `ordered` in consecutive batches of `batch_size`,
    `in_flight` batches at once."""
    from convs2s_tf.inference.translator import map_in_flight

    batches = [ordered[start : start + batch_size] for start in range(0, len(ordered), batch_size)]
    start = time.perf_counter()
    results = list(map_in_flight(translator.translate, batches, in_flight))
    seconds = time.perf_counter() - start
    return len(ordered) / seconds, [hypotheses[0][0] for batch in results for hypotheses in batch]


def main(argv):
    del argv
    from convs2s_tf.inference.translator import search_one_batch_per_core

    in_flight = search_one_batch_per_core()
    import tensorflow_text  # noqa: F401

    from convs2s_tf.inference import load_inference_model, open_saved_model

    try:
        sources = test_sentences(FLAGS.model_dir, FLAGS.sentences or None)
    except ValueError as error:
        raise app.UsageError(str(error))
    ordered = [sources[index] for index in length_order([len(s) for s in sources])]
    if FLAGS.saved_model:
        translator = open_saved_model(FLAGS.saved_model)
    else:
        translator = load_inference_model(FLAGS.model_dir).translator()
    # Untimed, as floor_share warms its translators: a compiled bucket and the graph path.
    translator.translate(sources[:1])
    translator.translate(ordered[-FLAGS.batch_size :])
    requests_rate, requests = time_file_batches(translator, ordered, FLAGS.batch_size, 1)
    rate, translations = time_file_batches(translator, ordered, FLAGS.batch_size, in_flight)
    if FLAGS.output:
        for path, lines in ((FLAGS.output, translations), (FLAGS.output + ".requests", requests)):
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in lines)
    print(
        json.dumps(
            {
                "translator": "export" if FLAGS.saved_model else "in_process",
                "batch_size": FLAGS.batch_size,
                "in_flight": in_flight,
                "sentences": len(ordered),
                "sentences_per_sec": round(rate, 2),
                "requests_sentences_per_sec": round(requests_rate, 2),
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
