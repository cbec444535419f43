"""Tests of `MultiStepAttention` against the paper's equations."""

import math

import numpy as np
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.layers import MultiStepAttention


def test_layer_contract():
    def normal(shape, seed):
        return tf.random.stateless_normal(shape, seed=[seed, 0])

    run_layer_test(
        MultiStepAttention,
        {"channels": 6, "embed_dim": 4},
        (normal([2, 3, 6], 1), normal([2, 3, 4], 2), normal([2, 5, 4], 3), normal([2, 5, 4], 4)),
        call_kwargs={"source_mask": tf.sequence_mask([5, 2], 5)},
        expected_output_shape=((2, 3, 6), (2, 3, 5)),
        expected_num_trainable_weights=6,
        # The softmax runs in float32 whatever the compute dtype.
        mixed_precision_output_dtype=("bfloat16", "float32"),
    )


def _attention_reference(layer, h, g, keys, values, mask):
    half = math.sqrt(0.5)
    w_in, b_in = layer.in_projection.kernel.numpy(), layer.in_projection.bias.numpy()
    w_out, b_out = layer.out_projection.kernel.numpy(), layer.out_projection.bias.numpy()
    d = (h @ w_in + b_in + g) * half
    scores = np.einsum("btf,bsf->bts", d, keys)
    scores = np.where(mask[:, None, :], scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights = weights / weights.sum(-1, keepdims=True)
    lengths = mask.sum(1).astype("float32")
    context = np.einsum("bts,bsf->btf", weights, values) * np.sqrt(lengths)[:, None, None]
    return (context @ w_out + b_out + h) * half, weights


def test_multi_step_attention(rng):
    layer = MultiStepAttention(channels=6, embed_dim=4)
    h = rng.normal(size=[2, 3, 6]).astype("float32")
    g = rng.normal(size=[2, 3, 4]).astype("float32")
    keys = rng.normal(size=[2, 5, 4]).astype("float32")
    values = rng.normal(size=[2, 5, 4]).astype("float32")
    mask = np.array([[True] * 5, [False, True, True, False, False]])
    outputs, weights = layer(h, g, keys, values, source_mask=tf.constant(mask))
    for variable in layer.weights:
        variable.assign(rng.normal(size=variable.shape).astype("float32") * 0.3 + 0.1)
    outputs, weights = layer(h, g, keys, values, source_mask=tf.constant(mask))
    weights = weights.numpy()
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)
    assert np.all(weights[1][:, ~mask[1]] == 0.0)
    expected_outputs, expected_weights = _attention_reference(layer, h, g, keys, values, mask)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outputs.numpy(), expected_outputs, rtol=1e-4, atol=1e-5)


def test_attention_context_scaled_by_sqrt_source_length():
    # With zero-mean-free setup: identity-like maps make the output a direct function
    # of the context, so doubling the real source length (same values) scales it by sqrt(2).
    layer = MultiStepAttention(channels=4, embed_dim=4)
    h = tf.zeros([2, 1, 4])
    g = tf.zeros([2, 1, 4])
    keys = tf.zeros([2, 4, 4])  # uniform attention over real tokens
    values = tf.ones([2, 4, 4])
    mask = tf.constant([[True, False, False, False], [True, True, True, True]])
    layer(h, g, keys, values, source_mask=mask)
    layer.out_projection.kernel_v.assign(np.eye(4, dtype="float32"))
    layer.out_projection.kernel_g.assign(np.ones([4], "float32"))
    outputs, _ = layer(h, g, keys, values, source_mask=mask)
    half = math.sqrt(0.5)
    # ctx = mean(values) * sqrt(s) = sqrt(s); output = ctx * sqrt(0.5).
    np.testing.assert_allclose(outputs.numpy()[0, 0], np.full(4, 1.0 * half), rtol=1e-6)
    np.testing.assert_allclose(outputs.numpy()[1, 0], np.full(4, 2.0 * half), rtol=1e-6)
