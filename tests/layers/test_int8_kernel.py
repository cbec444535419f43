"""Tests of `Int8Kernel`: int8 weights with a scale per column, and the product that
rounds its rows to int8."""

import numpy as np
import tensorflow as tf

from convs2s_tf.layers.int8_kernel import Int8Kernel, graph_mode_kernels


def _kernel(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.1


def test_quantize_keeps_each_column_within_half_a_step():
    kernel = _kernel([3, 16, 8])
    kernel[..., 5] = 0.0  # an all-zero column stays zero
    quantized = Int8Kernel.quantize(kernel)
    assert quantized.values.dtype == tf.int8 and quantized.shape == (3, 16, 8)
    assert quantized.scales.shape == (8,)
    values = quantized.values.numpy()
    # Each column's largest magnitude maps to 127.
    np.testing.assert_array_equal(np.abs(values).max(axis=(0, 1))[[0, 1, 2, 3, 4, 6, 7]], 127)
    assert not values[..., 5].any()
    error = np.abs(quantized.dequantize().numpy() - kernel)
    assert np.all(error <= quantized.scales.numpy() / 2 + 1e-7)


def test_product_rounds_each_row_to_int8_and_scales_back():
    kernel = _kernel([2, 12, 6], seed=1)
    rows = np.random.default_rng(2).standard_normal([5, 24]).astype(np.float32)
    rows[3] = 0.0  # an all-zero row gives zeros
    quantized = Int8Kernel.quantize(kernel)
    product = quantized.product(tf.constant(rows)).numpy()
    row_scales = np.maximum(np.abs(rows).max(axis=1, keepdims=True), 1e-12) / 127
    rounded = np.round(rows / row_scales)
    sums = rounded @ quantized.values.numpy().reshape(24, 6).astype(np.float64)
    expected = sums * row_scales * quantized.scales.numpy()
    np.testing.assert_allclose(product, expected, rtol=1e-5, atol=1e-6)
    assert not product[3].any()
    # Close to the float product: int8 rounding of both sides, about 1% here.
    np.testing.assert_allclose(product, rows @ kernel.reshape(24, 6), atol=0.05)


def test_int8_sums_and_float32_sums_of_the_same_integers_agree():
    quantized = Int8Kernel.quantize(_kernel([768, 40], seed=3))
    rows = tf.constant(np.random.default_rng(4).standard_normal([5, 768]).astype(np.float32))
    compiled = tf.function(quantized.product, jit_compile=True)(rows)
    (float_values,) = graph_mode_kernels([quantized])
    assert float_values.values.dtype == tf.float32
    np.testing.assert_array_equal(compiled.numpy(), float_values.product(rows).numpy())
    assert graph_mode_kernels(None) is None
