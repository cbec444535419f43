"""Translates text with a checkpoint or a SavedModel.

    echo "A dog runs." | python -m pipelines.translate --flagfile=configs/multi30k_en_de.cfg
    python -m pipelines.translate --saved_model=saved_models/multi30k_en_de \\
        --input=source.txt --output=out.txt [--nbest=5] [--attention_dir=plots/]
    python -m pipelines.translate --model_dir=runs/a,runs/b ...   # an ensemble of two runs

Reads one sentence per line (stdin or --input) and writes one translation per line
(stdout or --output); with --nbest > 1, `index ||| translation ||| score` lines. A
progress bar is shown when writing to a file. Lines of similar length are translated
together (sorted within windows of 16 batches, as fairseq sorts its buffer; one batch
per core at a time, plus one) and written in input order; a translation does not depend
on the lines batched with it. Lines end at "\\n" only (a trailing "\\r" is dropped), so
a U+2028 or form feed inside a sentence never shifts the output against the input;
invalid UTF-8 becomes U+FFFD.
"""

import os
import sys

from absl import app, flags

from convs2s_tf.data.text_files import read_lines, split_lines
from convs2s_tf.inference.translator import (
    length_sorted_batches,
    map_in_flight,
    search_one_batch_per_core,
)
from pipelines import cli
from pipelines import flags as pipeline_flags
from pipelines.inference import search_config_from_flags, translator_from_flags, usage_errors

FLAGS = flags.FLAGS
# Lines are sorted by length within windows of this many batches (fairseq-interactive's
# --buffer-size): similar lengths share a batch, and each window's translations are
# written, in input order, as soon as it is done.
SORT_WINDOW_BATCHES = 16
pipeline_flags.declare_key_flags(
    pipeline_flags.RUN,
    pipeline_flags.CHECKPOINT,
    pipeline_flags.INFERENCE,
    pipeline_flags.SEARCH,
    pipeline_flags.TRANSLATE,
)


def _read_lines(path):
    if path:
        return read_lines(path, invalid_utf8="replace")
    return split_lines(sys.stdin.buffer.read().decode("utf-8", errors="replace"))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.batch_size < 1:
        raise app.UsageError("--batch_size must be >= 1.")
    # A SavedModel's beam is its own: --nbest is checked against it once it is loaded.
    search_config = search_config_from_flags(with_nbest=not FLAGS.saved_model)
    # Checked before the model loads, which takes seconds.
    if FLAGS.input and not os.path.isfile(FLAGS.input):
        raise app.UsageError(f"--input file {FLAGS.input} does not exist.")
    in_flight = search_one_batch_per_core()
    translator = translator_from_flags(search_config, FLAGS.nbest, bool(FLAGS.attention_dir))
    lines = _read_lines(FLAGS.input)
    output = open(FLAGS.output, "w", encoding="utf-8") if FLAGS.output else sys.stdout
    progress = None
    if FLAGS.output:
        import keras

        progress = keras.utils.Progbar(len(lines), unit_name="sentence")
    if FLAGS.attention_dir:
        os.makedirs(FLAGS.attention_dir, exist_ok=True)
    window_size = FLAGS.batch_size * SORT_WINDOW_BATCHES
    try:
        for start in range(0, len(lines), window_size):
            window = lines[start : start + window_size]
            results = _translate_window(translator, window, start, progress, in_flight)
            for offset, hypotheses in enumerate(results):
                _write_hypotheses(output, start + offset, hypotheses)
    finally:
        if FLAGS.output:
            output.close()
    return 0


def _translate_window(translator, window, start, progress, in_flight):
    """The n-best lists of the lines `window` (starting at line `start`), in their order,
    translated in batches of similar length, `in_flight` at a time; attention heatmaps
    written if asked."""

    def translate_batch(indices):
        batch = [window[index] for index in indices]
        attention = _attention(translator, batch) if FLAGS.attention_dir else None
        return _translate(translator, batch), attention

    results = [None] * len(window)
    done = start
    batches = length_sorted_batches(window, FLAGS.batch_size)
    translated = map_in_flight(translate_batch, batches, in_flight)
    for indices, (nbest_lists, attention) in zip(batches, translated):
        if attention is not None:
            _write_attention(attention, [start + index for index in indices])
        for index, hypotheses in zip(indices, nbest_lists):
            results[index] = hypotheses
        done += len(indices)
        if progress is not None:
            progress.update(done)
    return results


def _write_hypotheses(output, line_number, hypotheses):
    if FLAGS.nbest == 1:
        output.write(hypotheses[0][0] + "\n")
        return
    for text, score in hypotheses:
        output.write(f"{line_number} ||| {text} ||| {score:.4f}\n")


def _translate(translator, batch):
    # The search settings a sentence cannot meet (e.g. --min_length beyond its maximum
    # output length) end the run; the translator's message names the flags.
    with usage_errors():
        return translator.translate(batch, nbest=FLAGS.nbest)


def _attention(translator, batch):
    with usage_errors():
        return translator.translate_with_attention(batch)


def _write_attention(results, line_numbers):
    # Plotted here, in the main thread: matplotlib is not thread-safe.
    from convs2s_tf.visualization import attention_heatmap_png

    for line_number, result in zip(line_numbers, results):
        png = attention_heatmap_png(
            result["attention"], result["source_pieces"], result["target_pieces"]
        )
        path = os.path.join(FLAGS.attention_dir, f"attention_{line_number:06d}.png")
        with open(path, "wb") as f:
            f.write(png)


if __name__ == "__main__":
    cli.run(main)
