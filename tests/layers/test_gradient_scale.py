"""Tests of `GradientScale` and `scale_gradient`."""

import numpy as np
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.layers import GradientScale, scale_gradient


def test_layer_contract():
    run_layer_test(
        GradientScale,
        {"scale": 0.25},
        tf.random.stateless_normal([2, 3, 4], seed=[5, 6]),
        expected_output_shape=(2, 3, 4),
        mixed_precision_output_dtype="bfloat16",
    )


def test_gradient_scale_identity_forward_scaled_backward():
    x = tf.constant([[1.0, -2.0, 3.0]])
    weights = tf.constant([[0.5, 2.0, -1.0]])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        scaled = GradientScale(0.125)(x)
        plain = tf.identity(x)
        loss_scaled = tf.reduce_sum(scaled * weights)
        loss_plain = tf.reduce_sum(plain * weights)
    np.testing.assert_array_equal(scaled.numpy(), x.numpy())
    np.testing.assert_allclose(
        tape.gradient(loss_scaled, x).numpy(), 0.125 * tape.gradient(loss_plain, x).numpy()
    )
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(scale_gradient(x, 3.0))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [[3.0, 3.0, 3.0]])
