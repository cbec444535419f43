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

Ends with one JSON line: microseconds per call, by rows and form.
"""

import json
import statistics
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

from benchmarks.comparison_report import cpu_description

flags.DEFINE_list("rows", ["5", "40", "200", "640"], "Rows of the product (beam rows).")
flags.DEFINE_integer("input_dim", 256, "Columns of the rows (the decoder's output width).")
flags.DEFINE_integer("output_dim", 8000, "Columns of the weights (the vocabulary).")
flags.DEFINE_integer("rounds", 5, "Alternated timings of each form.")
flags.DEFINE_float("seconds", 0.25, "Length of one timing.")
FLAGS = flags.FLAGS


def quantize_columns(weights):
    """`weights` as int8 with one scale per column (symmetric: the column's largest
    magnitude maps to 127); returns `(int8 values, float32 scales)`."""
    scales = np.maximum(np.abs(weights).max(axis=0), 1e-12) / 127.0
    return np.round(weights / scales).astype(np.int8), scales.astype(np.float32)


def dynamic_int8_product(rows, weights_int8, weight_scales):
    """`rows x weights` through an int8 product: each row scaled to int8 by its largest
    magnitude, int32 sums scaled back to float32."""
    row_scales = tf.maximum(tf.reduce_max(tf.abs(rows), axis=1, keepdims=True), 1e-12) / 127.0
    rows_int8 = tf.cast(tf.round(rows / row_scales), tf.int8)
    sums = tf.raw_ops.BatchMatMulV3(x=rows_int8, y=weights_int8, Tout=tf.int32)
    return tf.cast(sums, tf.float32) * row_scales * weight_scales


def product_forms(rows, weights):
    """Each form's `tf.function` (no arguments) of `rows x weights` (numpy float32)."""
    weights_int8, weight_scales = quantize_columns(weights)
    rows_tensor = tf.constant(rows)
    weights_tensor = tf.constant(weights)
    weights_bfloat16 = tf.constant(weights, tf.bfloat16)
    weights_int8_tensor = tf.constant(weights_int8)
    weights_qint8 = tf.constant(weights_int8, tf.qint8)
    scales_tensor = tf.constant(weight_scales)
    rows_int8 = tf.constant(np.clip(np.round(rows * 40.0), -127, 127).astype(np.int8))
    rows_quint8 = tf.constant(np.clip(np.round(rows * 40.0) + 128, 0, 255).astype(np.uint8))
    bound = float(np.abs(weights).max())

    def int8():
        return tf.raw_ops.BatchMatMulV3(x=rows_int8, y=weights_int8_tensor, Tout=tf.int32)

    forms = {
        "float32": lambda: tf.matmul(rows_tensor, weights_tensor),
        "bfloat16": lambda: tf.matmul(tf.cast(rows_tensor, tf.bfloat16), weights_bfloat16),
        "int8": int8,
        "quantized_matmul": lambda: tf.raw_ops.QuantizedMatMulWithBias(
            a=tf.bitcast(rows_quint8, tf.quint8),
            b=weights_qint8,
            bias=tf.zeros([weights.shape[1]]),
            min_a=-3.2,
            max_a=3.2,
            min_b=-bound,
            max_b=bound,
            Toutput=tf.qint32,
        )[0],
        "uniform_quantized_hybrid": lambda: tf.raw_ops.UniformQuantizedDotHybrid(
            lhs=rows_tensor,
            rhs=weights_qint8,
            rhs_scales=scales_tensor,
            rhs_zero_points=tf.zeros([weights.shape[1]], tf.int32),
            Tout=tf.float32,
            rhs_quantization_axis=1,
            rhs_quantization_min_val=-128,
            rhs_quantization_max_val=127,
        ),
    }
    functions = {name: tf.function(form) for name, form in forms.items()}
    functions["float32_xla"] = tf.function(forms["float32"], jit_compile=True)
    functions["int8_xla"] = tf.function(int8, jit_compile=True)
    functions["int8_dynamic_xla"] = tf.function(
        lambda: dynamic_int8_product(rows_tensor, weights_int8_tensor, scales_tensor),
        jit_compile=True,
    )
    return functions


def seconds_per_call(function, seconds):
    """Mean seconds per call of `function` over about `seconds` (after one warm call)."""
    function()
    calls, start = 0, time.perf_counter()
    while calls < 5 or time.perf_counter() - start < seconds:
        function()
        calls += 1
    return (time.perf_counter() - start) / calls


def time_forms(rows, input_dim, output_dim, rounds, seconds):
    """Median microseconds per call of each form at `rows`, alternated over `rounds`."""
    rng = np.random.default_rng(0)
    weights = (rng.standard_normal((input_dim, output_dim)) * 0.05).astype(np.float32)
    functions = product_forms(rng.standard_normal((rows, input_dim)).astype(np.float32), weights)
    timings = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            timings[name].append(seconds_per_call(function, seconds))
    return {name: round(statistics.median(values) * 1e6, 1) for name, values in timings.items()}


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
    print(
        json.dumps(
            {
                "cpu": cpu_description(),
                "input_dim": FLAGS.input_dim,
                "output_dim": FLAGS.output_dim,
                "microseconds_per_call": results,
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
