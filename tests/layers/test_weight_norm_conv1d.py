"""Tests of `WeightNormConv1D`: padding rules, incremental step, hand-written gradient."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test
from helpers.weight_norm import check_weight_norm

from convs2s_tf.layers import WeightNormConv1D

INPUTS = tf.random.stateless_normal([2, 7, 4], seed=[9, 10])


@pytest.mark.parametrize(
    "init_kwargs, length",
    [
        ({"filters": 6, "kernel_size": 3, "padding": "same"}, 7),
        ({"filters": 6, "kernel_size": 2, "padding": "same"}, 7),
        ({"filters": 6, "kernel_size": 3, "padding": "valid", "use_bias": False}, 5),
    ],
    ids=["same", "same_even_width", "valid_no_bias"],
)
def test_layer_contract(init_kwargs, length):
    run_layer_test(
        WeightNormConv1D,
        init_kwargs,
        INPUTS,
        expected_output_shape=(2, length, 6),
        expected_num_trainable_weights=3 if init_kwargs.get("use_bias", True) else 2,
        mixed_precision_output_dtype="bfloat16",
    )


@pytest.mark.parametrize("kernel_size", [1, 2, 3, 5])
def test_causal_layer_contract_and_step(kernel_size):
    run_layer_test(
        WeightNormConv1D,
        {"filters": 8, "kernel_size": kernel_size, "padding": "causal", "stddev": 0.2},
        INPUTS,
        expected_output_shape=(2, 7, 8),
        expected_num_trainable_weights=3,
        initial_state_fn=lambda layer: layer.initial_window(2, 4),
        step_fn=lambda layer, t, window: layer.step(INPUTS[:, t], window),
    )


def test_weight_norm_effective_weight(rng):
    check_weight_norm(
        WeightNormConv1D(6, 3, padding="same", stddev=0.2),
        np.ones([2, 7, 4], "float32"),
        norm_axes=(0, 1),
        rng=rng,
    )


def _reference_conv(inputs, kernel, bias, left, right):
    padded = np.pad(inputs, [(0, 0), (left, right), (0, 0)])
    width = kernel.shape[0]
    length = padded.shape[1] - width + 1
    out = np.stack(
        [np.einsum("bki,kio->bo", padded[:, t : t + width], kernel) for t in range(length)], 1
    )
    return out + bias


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("padding", ["same", "causal"])
def test_conv_padding_rules(width, padding, rng):
    layer = WeightNormConv1D(4, width, padding=padding)
    inputs = rng.normal(size=[2, 9, 3]).astype("float32")
    layer(inputs)
    layer.bias.assign(rng.normal(size=[4]).astype("float32"))
    # "same": (k-1)//2 zeros left and k//2 right (asymmetric for even k); causal: k-1 left.
    left, right = ((width - 1) // 2, width // 2) if padding == "same" else (width - 1, 0)
    expected = _reference_conv(inputs, layer.kernel.numpy(), layer.bias.numpy(), left, right)
    outputs = layer(inputs).numpy()
    assert outputs.shape == (2, 9, 4)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_conv_step_equals_causal_conv(width, rng):
    layer = WeightNormConv1D(4, width, padding="causal")
    inputs = rng.normal(size=[3, 8, 5]).astype("float32")
    parallel = layer(inputs).numpy()
    window = layer.initial_window(3, 5)
    assert window.shape == (3, width - 1, 5)
    for t in range(8):
        y_t, window = layer.step(tf.constant(inputs[:, t]), window)
        np.testing.assert_allclose(y_t.numpy(), parallel[:, t], atol=1e-5)
        # The window holds exactly the last k-1 inputs.
        expected_window = np.concatenate([np.zeros([3, width, 5], "float32"), inputs], 1)[
            :, t + 2 : t + width + 1
        ]
        np.testing.assert_array_equal(window.numpy(), expected_window)


def test_step_requires_causal_padding():
    layer = WeightNormConv1D(4, 3, padding="same")
    with pytest.raises(ValueError, match="causal"):
        layer.step(tf.ones([1, 2]), tf.zeros([1, 2, 2]))


def test_layers_build_inside_tf_function(rng):
    layer = WeightNormConv1D(4, 3, padding="causal")

    @tf.function(input_signature=[tf.TensorSpec([None, None, 3], tf.float32)])
    def run(x):
        return layer(x)

    outputs = run(tf.constant(rng.normal(size=[2, 5, 3]).astype("float32")))
    assert outputs.shape == (2, 5, 4)
    np.testing.assert_allclose(layer.kernel.numpy(), layer.kernel_v.numpy(), rtol=1e-6)


@pytest.mark.parametrize("kernel_size", [2, 3, 5])
@pytest.mark.parametrize("padding", ["causal", "same", "valid"])
def test_conv_gradients_match_autodiff_of_conv1d(kernel_size, padding):
    # The layer's convolution has a hand-written kernel gradient (one matmul).
    layer = WeightNormConv1D(6, kernel_size, padding=padding)
    inputs = tf.random.stateless_normal([3, 7, 4], seed=[kernel_size, len(padding)])
    layer.build(inputs.shape)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(inputs)
        outputs = layer(inputs)
        loss = tf.reduce_sum(outputs * tf.sin(outputs))
        kernel = layer.kernel
        left, right = layer._paddings()
        padded = tf.pad(inputs, [[0, 0], [left, right], [0, 0]])
        reference = tf.nn.conv1d(padded, kernel, 1, "VALID") + layer.bias
        reference_loss = tf.reduce_sum(reference * tf.sin(reference))
    np.testing.assert_allclose(outputs.numpy(), reference.numpy(), atol=1e-6)
    for got, expected in zip(
        tape.gradient(loss, [inputs, layer.kernel_v, layer.kernel_g]),
        tape.gradient(reference_loss, [inputs, layer.kernel_v, layer.kernel_g]),
    ):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-5)
