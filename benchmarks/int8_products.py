"""Whether 8-bit weights would pay here: one decoder product in float32, bfloat16 and
the 8-bit forms core TensorFlow runs on this CPU.

    python -m benchmarks.int8_products [--rows=5,40,200,640] [--input_dim=256]
        [--output_dim=8000] [--rounds=5]

The product is `[rows, input_dim] x [input_dim, output_dim]`, by default the default
model's vocabulary projection (its largest weight, 8.2 MB in float32) at the rows of a
beam search: 5 at batch 1 (beam 5), up to 640 at batch 128. Each form is a `tf.function`
called in a loop for a quarter of a second, in alternated rounds; the median per call is
printed, and its speed-up over float32 in graph mode (oneDNN's kernels). The forms:

* `float32`, `float32_xla`: the product as the search computes it, in graph mode and
  compiled by XLA;
* `bfloat16`: both operands in bfloat16 (graph mode, as a bfloat16 export multiplies);
* `int8`, `int8_xla`: int8 rows and weights, int32 sums (`BatchMatMulV3`): the product
  alone, the rows already quantised;
* `int8_dynamic_xla`: what an 8-bit weight path would compute at every step, compiled:
  each float32 row scaled to int8 by its largest magnitude, the int8 product, the sums
  scaled back by the row's and the weight column's scales;
* `quantized_matmul`: `QuantizedMatMulWithBias` (uint8 rows, int8 weights; the op of
  TensorFlow's oneDNN builds);
* `uniform_quantized_hybrid`: `UniformQuantizedDotHybrid` (float32 rows, int8 weights
  with a scale per column).

With `--model_dir=RUN`, also what 8-bit weights would cost in quality: the run's test
split translated in process (batches of 128 sorted by length) with the search's folded
kernels as trained, then rounded to int8 with a scale per output column (weights only:
the rows stay float32), and each one's BLEU, chrF and how many translations are
unchanged.

Ends with one JSON line: microseconds per call, by rows and form (and the scores).
"""

import json

from absl import app, flags

from benchmarks.comparison_report import cpu_description
from benchmarks.int8_weights import int8_weights_scores, time_forms

flags.DEFINE_list("rows", ["5", "40", "200", "640"], "Rows of the product (beam rows).")
flags.DEFINE_integer("input_dim", 256, "Columns of the rows (the decoder's output width).")
flags.DEFINE_integer("output_dim", 8000, "Columns of the weights (the vocabulary).")
flags.DEFINE_integer("rounds", 5, "Alternated timings of each form.")
flags.DEFINE_float("seconds", 0.25, "Length of one timing.")
flags.DEFINE_string("model_dir", None, "A trained run: also its BLEU with int8 weights.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    results = {}
    for rows in (int(value) for value in FLAGS.rows):
        micros = time_forms(rows, FLAGS.input_dim, FLAGS.output_dim, FLAGS.rounds, FLAGS.seconds)
        results[str(rows)] = micros
        line = ", ".join(
            f"{name} {value:,.0f} us ({micros['float32'] / value:.2f}x)"
            for name, value in micros.items()
        )
        print(f"{rows} rows: {line}", flush=True)
    line = {
        "cpu": cpu_description(),
        "input_dim": FLAGS.input_dim,
        "output_dim": FLAGS.output_dim,
        "microseconds_per_call": results,
    }
    if FLAGS.model_dir:
        line["scores"] = int8_weights_scores(FLAGS.model_dir)
        print(f"scores: {json.dumps(line['scores'])}", flush=True)
    print(json.dumps(line))


if __name__ == "__main__":
    app.run(main)
