"""Tests of `RandomBitsDropout`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.layers import RandomBitsDropout


def test_layer_contract():
    # In training: a seeded layer, its config clone and its deserialised copy draw the
    # same first mask.
    run_layer_test(
        RandomBitsDropout,
        {"rate": 0.3, "seed": 7},
        tf.random.stateless_normal([4, 6, 5], seed=[7, 8]),
        call_kwargs={"training": True},
        expected_output_shape=(4, 6, 5),
        expected_num_non_trainable_variables=1,  # the seed generator's state
        mixed_precision_output_dtype="bfloat16",
    )


def test_random_bits_dropout_drops_at_the_rate_and_scales_the_rest():
    layer = RandomBitsDropout(0.3, seed=7)
    inputs = tf.ones([1001, 999])  # odd size: the last 32-bit word is half used
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = layer(inputs, training=True)
    values = outputs.numpy()
    kept = values != 0
    rounded_rate = round(0.3 * 65536) / 65536
    assert abs(1 - kept.mean() - rounded_rate) < 2e-3  # ~1M draws: std 4.6e-4
    np.testing.assert_allclose(values[kept], 1 / (1 - rounded_rate), rtol=1e-6)
    # The gradient is the same mask, scaled the same way.
    np.testing.assert_array_equal(tape.gradient(outputs, inputs).numpy(), values)
    # A new mask per call; none at inference; none at rate 0.
    assert (layer(inputs, training=True).numpy() != values).any()
    np.testing.assert_array_equal(layer(inputs, training=False), inputs)
    np.testing.assert_array_equal(RandomBitsDropout(0.0)(inputs, training=True), inputs)


def test_random_bits_dropout_keeps_dtype_and_config():
    layer = RandomBitsDropout(0.2, seed=3, dtype="mixed_bfloat16")
    outputs = layer(tf.ones([4, 6], tf.bfloat16), training=True)
    assert outputs.dtype == tf.bfloat16
    assert RandomBitsDropout.from_config(layer.get_config()).rate == 0.2
    with pytest.raises(ValueError, match="rate in \\[0, 1\\)"):
        RandomBitsDropout(1.0)
