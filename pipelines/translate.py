"""Translates text with a checkpoint or a SavedModel.

    echo "A dog runs." | python -m pipelines.translate --flagfile=configs/multi30k_en_de.cfg
    python -m pipelines.translate --saved_model=saved_models/multi30k_en_de \\
        --input=source.txt --output=out.txt [--nbest=5] [--attention_dir=plots/]
    python -m pipelines.translate --model_dir=runs/a,runs/b ...   # an ensemble of two runs

Reads one sentence per line (stdin or --input) and writes one translation per line
(stdout or --output); with --nbest > 1, `index ||| translation ||| score` lines. A
progress bar is shown when writing to a file. Lines end at "\\n" only (a trailing "\\r"
is dropped), so a U+2028 or form feed inside a sentence never shifts the output against
the input; invalid UTF-8 becomes U+FFFD.
"""

import os
import sys

from absl import app, flags

from convs2s_tf.data.text_files import read_lines, split_lines
from pipelines import cli
from pipelines import flags as pipeline_flags
from pipelines.inference import search_config_from_flags, translator_from_flags, usage_errors

FLAGS = flags.FLAGS
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
    translator = translator_from_flags(search_config, FLAGS.nbest, bool(FLAGS.attention_dir))
    lines = _read_lines(FLAGS.input)
    output = open(FLAGS.output, "w", encoding="utf-8") if FLAGS.output else sys.stdout
    progress = None
    if FLAGS.output:
        import keras

        progress = keras.utils.Progbar(len(lines), unit_name="sentence")
    if FLAGS.attention_dir:
        os.makedirs(FLAGS.attention_dir, exist_ok=True)
    try:
        for start in range(0, len(lines), FLAGS.batch_size):
            batch = lines[start : start + FLAGS.batch_size]
            if FLAGS.attention_dir:
                _write_attention(translator, batch, start)
            for offset, hypotheses in enumerate(_translate(translator, batch)):
                if FLAGS.nbest == 1:
                    output.write(hypotheses[0][0] + "\n")
                else:
                    for text, score in hypotheses:
                        output.write(f"{start + offset} ||| {text} ||| {score:.4f}\n")
            if progress is not None:
                progress.update(min(start + FLAGS.batch_size, len(lines)))
    finally:
        if FLAGS.output:
            output.close()
    return 0


def _translate(translator, batch):
    # The search settings a sentence cannot meet (e.g. --min_length beyond its maximum
    # output length) end the run; the translator's message names the flags.
    with usage_errors():
        return translator.translate(batch, nbest=FLAGS.nbest)


def _write_attention(translator, batch, start):
    from convs2s_tf.visualization import attention_heatmap_png

    with usage_errors():
        results = translator.translate_with_attention(batch)
    for offset, result in enumerate(results):
        png = attention_heatmap_png(
            result["attention"], result["source_pieces"], result["target_pieces"]
        )
        path = os.path.join(FLAGS.attention_dir, f"attention_{start + offset:06d}.png")
        with open(path, "wb") as f:
            f.write(png)


if __name__ == "__main__":
    cli.run(main)
