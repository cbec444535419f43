"""Tests of `ConvBox`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.models.posenet.conv_box import ConvBox


@pytest.mark.parametrize("groups", [1, 2])
def test_layer_contract_and_causal_step(groups):
    inputs = tf.random.stateless_normal([2, 6, 4], seed=[7, 8])
    run_layer_test(
        ConvBox,
        {"filters": 4, "convolutions": [(3, 1), (3, 2)], "padding": "causal", "groups": groups},
        inputs,
        expected_output_shape=(2, 6, 4),
        expected_num_trainable_weights=8,  # per convolution: 2 kernels, gamma, beta
        initial_state_fn=lambda layer: layer.initial_state(2, 4, positions=100),
        step_fn=lambda layer, t, state: layer.step(inputs[:, t], state, t),
        mixed_precision_output_dtype="bfloat16",
    )


def test_relu_mask_conv_norm(rng):
    box = ConvBox(filters=3, convolutions=[(3, 1)])
    inputs = rng.normal(size=[1, 5, 3]).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0]], "float32")
    outputs = box(inputs, padding_mask=mask).numpy()
    conv, norm = box.convs[0], box.norms[0]
    expected = norm(conv(np.maximum(inputs, 0) * mask[..., None])).numpy()
    np.testing.assert_allclose(outputs, expected, atol=1e-6)
    # The padding's values do not reach the real positions.
    changed = inputs.copy()
    changed[:, 3:] = 100.0
    np.testing.assert_allclose(
        box(changed, padding_mask=mask).numpy()[:, :3], outputs[:, :3], atol=1e-6
    )


def test_a_box_needs_a_convolution():
    with pytest.raises(ValueError, match="at least one convolution"):
        ConvBox(4, [])
