"""benchmarks.int8_products and int8_weights: the 8-bit forms compute the product they
stand for."""

import json

import numpy as np
import tensorflow as tf
from conftest import run_python

from benchmarks import int8_weights


def test_columns_quantise_to_int8_with_one_scale_each():
    weights = np.array([[0.5, -2.0, 0.0], [-0.25, 1.0, 0.0]], np.float32)
    values, scales = int8_weights.quantize_columns(weights)
    assert values.dtype == np.int8 and scales.shape == (3,)
    np.testing.assert_array_equal(values[:, 0], [127, -64])  # 0.5 maps to 127
    np.testing.assert_array_equal(values[:, 1], [-127, 64])
    np.testing.assert_array_equal(values[:, 2], [0, 0])  # an all-zero column stays finite
    np.testing.assert_allclose(values * scales, weights, atol=np.abs(weights).max() / 254)


def test_dynamic_int8_product_is_the_float32_product_within_rounding():
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((7, 64)).astype(np.float32)
    weights = (rng.standard_normal((64, 50)) * 0.05).astype(np.float32)
    values, scales = int8_weights.quantize_columns(weights)
    product = int8_weights.dynamic_int8_product(
        tf.constant(rows), tf.constant(values), tf.constant(scales)
    ).numpy()
    exact = rows @ weights
    assert np.abs(product - exact).max() < 0.02 * np.abs(exact).max()
    assert np.corrcoef(product.ravel(), exact.ravel())[0, 1] > 0.999


def test_every_form_is_timed_at_every_row_count():
    result = run_python(
        [
            "-m",
            "benchmarks.int8_products",
            "--rows=1,3",
            "--input_dim=16",
            "--output_dim=24",
            "--rounds=1",
            "--seconds=0.01",
        ]
    )
    line = json.loads(result.stdout.strip().splitlines()[-1])
    forms = {
        "float32",
        "float32_xla",
        "bfloat16",
        "int8",
        "int8_xla",
        "int8_dynamic_xla",
        "quantized_matmul",
        "uniform_quantized_hybrid",
    }
    assert set(line["microseconds_per_call"]) == {"1", "3"}
    for micros in line["microseconds_per_call"].values():
        assert set(micros) == forms and all(value > 0 for value in micros.values())
    assert "3 rows: float32" in result.stdout
