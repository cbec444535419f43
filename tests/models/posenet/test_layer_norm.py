"""Tests of `LayerNorm`: Keras' layer norm forward, its closed-form gradient."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.models.posenet.layer_norm import LayerNorm


def test_layer_contract():
    run_layer_test(
        LayerNorm,
        {"epsilon": 1e-6},
        tf.random.stateless_normal([2, 3, 4], seed=[9, 1]),
        expected_output_shape=(2, 3, 4),
        expected_num_trainable_weights=2,
        mixed_precision_output_dtype="bfloat16",
    )


def _norm_pair(policy, rng, dim=24):
    """A Keras layer norm and a `LayerNorm` with the same (trained-like) weights."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        norms = keras.layers.LayerNormalization(epsilon=1e-6), LayerNorm(epsilon=1e-6)
    finally:
        keras.config.set_dtype_policy(previous)
    gamma, beta = (rng.normal(size=[dim]).astype("float32") for _ in range(2))
    for norm in norms:
        norm.build((None, None, dim))
        norm.gamma.assign(gamma)
        norm.beta.assign(beta)
    return norms


def _outputs_and_gradients(norm, inputs, upstream, training):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = norm(inputs, training=training)
        loss = tf.reduce_sum(tf.cast(outputs, tf.float32) * upstream)
    return outputs, tape.gradient(loss, [inputs, norm.gamma, norm.beta])


def _assert_close(actual, expected, tolerance):
    assert actual.dtype == expected.dtype
    expected = tf.cast(expected, tf.float32).numpy()
    np.testing.assert_allclose(
        tf.cast(actual, tf.float32).numpy(), expected, atol=tolerance * np.abs(expected).max()
    )


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_inference_is_keras_bit_for_bit_and_training_differentiates_the_same_norm(policy, rng):
    keras_norm, norm = _norm_pair(policy, rng)
    # Unit-free activations off centre, as a residual stream's.
    inputs = tf.cast(rng.normal(3.0, 40.0, size=[6, 9, 24]).astype("float32"), norm.compute_dtype)
    upstream = tf.constant(rng.normal(size=[6, 9, 24]).astype("float32"))
    expected, expected_gradients = _outputs_and_gradients(keras_norm, inputs, upstream, True)
    np.testing.assert_array_equal(norm(inputs), expected)
    outputs, gradients = _outputs_and_gradients(norm, inputs, upstream, True)
    # Training's formula rounds differently in float32: one bfloat16 step at most.
    _assert_close(outputs, expected, 1e-6 if policy == "float32" else 1e-2)
    for gradient, expected_gradient in zip(gradients, expected_gradients):
        _assert_close(gradient, expected_gradient, 1e-5 if policy == "float32" else 1e-2)
    # The closed form is not the differentiated formula (that would pass trivially).
    assert not np.array_equal(gradients[0], expected_gradients[0])


def test_a_keras_layer_norms_checkpoint_restores_into_it(tmp_path, rng):
    keras_norm, _ = _norm_pair("float32", rng)
    path = tf.train.Checkpoint(norm=keras_norm).write(str(tmp_path / "ckpt"))
    norm = LayerNorm(epsilon=1e-6)
    norm.build((None, 24))
    tf.train.Checkpoint(norm=norm).read(path).assert_consumed()
    inputs = tf.constant(rng.normal(size=[4, 24]).astype("float32"))
    np.testing.assert_array_equal(norm(inputs), keras_norm(inputs))
    assert LayerNorm.from_config(norm.get_config()).epsilon == 1e-6


def test_refuses_what_it_does_not_compute():
    with pytest.raises(ValueError, match="last axis, centred and scaled"):
        LayerNorm(axis=1)
    with pytest.raises(ValueError, match="center=False"):
        LayerNorm(center=False)
