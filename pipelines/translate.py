"""Translates text with a checkpoint or a SavedModel.

    echo "A dog runs." | python -m pipelines.translate --flagfile=configs/multi30k_en_de.cfg
    python -m pipelines.translate --saved_model=saved_models/multi30k_en_de \\
        --input=source.txt --output=out.txt [--nbest=5] [--attention_dir=plots/]

Reads one sentence per line (stdin or --input) and writes one translation per line
(stdout or --output); with --nbest > 1, `index ||| translation ||| score` lines. A
progress bar is shown when writing to a file.
"""

import os
import sys

from absl import app, flags

from pipelines import flags as pipeline_flags
from pipelines.inference import translator_from_flags

FLAGS = flags.FLAGS
pipeline_flags.define_all_flags()


def _read_lines(path):
    if path:
        if not os.path.exists(path):
            raise app.UsageError(f"--input file {path} does not exist.")
        with open(path, "rb") as f:
            data = f.read()
    else:
        data = sys.stdin.buffer.read()
    # Invalid UTF-8 is replaced (U+FFFD) rather than failing the whole file.
    return data.decode("utf-8", errors="replace").splitlines()


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.batch_size < 1:
        raise app.UsageError("--batch_size must be >= 1.")
    lines = _read_lines(FLAGS.input)
    translator = translator_from_flags()
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
            for offset, hypotheses in enumerate(translator.translate(batch, nbest=FLAGS.nbest)):
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


def _write_attention(translator, batch, start):
    from convs2s_tf.visualization import attention_heatmap_png

    for offset, result in enumerate(translator.translate_with_attention(batch)):
        png = attention_heatmap_png(
            result["attention"], result["source_pieces"], result["target_pieces"]
        )
        path = os.path.join(FLAGS.attention_dir, f"attention_{start + offset:06d}.png")
        with open(path, "wb") as f:
            f.write(png)


if __name__ == "__main__":
    app.run(main)
