"""8-bit weights for `benchmarks.int8_products`: the weights' quantisation, the product
an 8-bit path would compute, the forms timed, and the scores with int8 weights (no
flags here, so tests import it beside other benchmarks)."""

import statistics
import time

import numpy as np
import tensorflow as tf

from convs2s_tf.layers.int8_kernel import Int8Kernel

# The fixed scale of the already-quantised rows of the `int8` and `quantized_matmul`
# forms: standard normal rows within +-3.2 fill int8's range.
ROWS_PER_UNIT = 40.0
ROWS_BOUND = 127 / ROWS_PER_UNIT


def quantize_columns(weights):
    """`weights` as int8 with one scale per column, the last axis (symmetric: the
    column's largest magnitude maps to 127); returns `(int8 values, float32 scales)` as
    numpy arrays (`Int8Kernel.quantize`, which `--int8_weights` uses)."""
    kernel = Int8Kernel.quantize(weights)
    return kernel.values.numpy(), kernel.scales.numpy()


def dynamic_int8_product(rows, weights_int8, weight_scales):
    """`rows x weights` through an int8 product: each row scaled to int8 by its largest
    magnitude, int32 sums scaled back to float32 (`Int8Kernel.product`)."""
    return Int8Kernel(weights_int8, weight_scales).product(rows)


def product_forms(rows, weights):
    """Each form's `tf.function` (no arguments) of `rows x weights` (numpy float32)."""
    weights_int8, weight_scales = quantize_columns(weights)
    rows_tensor = tf.constant(rows)
    weights_tensor = tf.constant(weights)
    weights_bfloat16 = tf.constant(weights, tf.bfloat16)
    weights_int8_tensor = tf.constant(weights_int8)
    weights_qint8 = tf.constant(weights_int8, tf.qint8)
    scales_tensor = tf.constant(weight_scales)
    rows_int8 = tf.constant(np.clip(np.round(rows * ROWS_PER_UNIT), -127, 127).astype(np.int8))
    rows_quint8 = tf.constant(
        np.clip(np.round(rows * ROWS_PER_UNIT) + 128, 0, 255).astype(np.uint8)
    )
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
            min_a=-ROWS_BOUND,
            max_a=ROWS_BOUND,
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


def int8_weights_scores(model_dir, batch_size=128):
    """The test split's scores with the run's folded kernels as trained and rounded to
    int8 (`quantize_columns`), and how many translations the rounding left unchanged."""
    import tensorflow_text  # noqa: F401  (the tokenizer's ops)

    from benchmarks.run_files import test_split_paths
    from convs2s_tf.data.text_files import read_lines
    from convs2s_tf.evaluation.bleu import corpus_scores
    from convs2s_tf.export.translation_module import TranslationModule
    from convs2s_tf.inference.factory import load_inference_model
    from convs2s_tf.inference.translator import length_sorted_batches

    inference = load_inference_model(model_dir)
    sources, references = (read_lines(path) for path in test_split_paths(model_dir))
    module = TranslationModule(inference.model, inference.tokenizer, inference.search_config)
    batches = length_sorted_batches(sources, batch_size)

    def translate():
        translations = [""] * len(sources)
        for batch in batches:
            output = module.translate(tf.constant([sources[index] for index in batch]))
            for index, text in zip(batch, output["translation"].numpy()):
                translations[index] = text.decode("utf-8")
        return translations

    float32 = translate()
    for variable in module.folded_kernels:
        values, scales = quantize_columns(variable.numpy())
        variable.assign(values.astype(np.float32) * scales)
    int8 = translate()
    scores = {}
    for name, translations in (("float32", float32), ("int8_weights", int8)):
        figures = corpus_scores(translations, references)
        scores[name] = {key: round(figures[key], 2) for key in ("bleu", "chrf")}
    scores["unchanged"] = sum(a == b for a, b in zip(float32, int8))
    scores["sentences"] = len(sources)
    return scores
