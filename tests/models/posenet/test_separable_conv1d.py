"""Tests of `SeparableConv1D`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.models.posenet.conv_box import ConvBox
from convs2s_tf.models.posenet.separable_conv1d import (
    GATHERED_TAPS_POSITIONS,
    SeparableConv1D,
    window_position,
)


def reference(inputs, depthwise, pointwise, dilation, padding):
    """numpy: depthwise taps, then the grouped pointwise map."""
    kernel_size, channels = depthwise.shape
    groups = pointwise.shape[0]
    total = (kernel_size - 1) * dilation
    left = total if padding == "causal" else total // 2
    padded = np.pad(inputs, [(0, 0), (left, total - left), (0, 0)])
    time = inputs.shape[1]
    depth = np.zeros_like(inputs)
    for t in range(time):
        for j in range(kernel_size):
            depth[:, t] += padded[:, t + j * dilation] * depthwise[j]
    parts = np.split(depth, groups, axis=-1)
    return np.concatenate([part @ pointwise[g] for g, part in enumerate(parts)], axis=-1)


@pytest.mark.parametrize(
    "init_kwargs",
    [
        {"filters": 6, "kernel_size": 3, "padding": "causal", "dilation_rate": 2},
        {"filters": 6, "kernel_size": 3, "padding": "causal", "groups": 3, "use_bias": True},
    ],
    ids=["dilated", "grouped_bias"],
)
def test_layer_contract_and_causal_step(init_kwargs):
    inputs = tf.random.stateless_normal([2, 7, 6], seed=[1, 2])
    run_layer_test(
        SeparableConv1D,
        init_kwargs,
        inputs,
        expected_output_shape=(2, 7, 6),
        expected_num_trainable_weights=3 if init_kwargs.get("use_bias") else 2,
        # A full window from the start: the ring wraps after 5 (dilated) or 3 positions.
        initial_state_fn=lambda layer: layer.initial_window(2, 6, positions=100),
        step_fn=lambda layer, t, window: layer.step(
            inputs[:, t], window, window_position(window, t, layer.window_span)
        ),
        mixed_precision_output_dtype="bfloat16",
    )


@pytest.mark.parametrize("padding", ["same", "causal"])
@pytest.mark.parametrize("groups, dilation", [(1, 1), (2, 3)])
def test_matches_the_definition(padding, groups, dilation, rng):
    layer = SeparableConv1D(
        4, kernel_size=4, dilation_rate=dilation, padding=padding, groups=groups
    )
    inputs = rng.normal(size=[2, 9, 6]).astype("float32")
    outputs = layer(inputs).numpy()
    expected = reference(
        inputs, layer.depthwise_kernel.numpy(), layer.pointwise_kernel.numpy(), dilation, padding
    )
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


@pytest.mark.parametrize("padding", ["same", "causal"])
@pytest.mark.parametrize("kernel_size, dilation", [(7, 1), (6, 3), (31, 4)])
@pytest.mark.parametrize("length", [1, 2, 5, 40])
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_taps_that_read_only_padding_are_skipped_exactly(
    padding, kernel_size, dilation, length, training
):
    """Sequences shorter than the kernel's span (the taps that reach no input left out)
    give the definition's outputs and the full kernel's gradients (zero where a tap
    reads only padding), by either depthwise convolution: inference gathers the taps of
    inputs of up to `GATHERED_TAPS_POSITIONS` positions (here lengths 1 to 5 of 2
    sentences), training and longer inputs run TensorFlow's depthwise op."""
    layer = SeparableConv1D(4, kernel_size, dilation_rate=dilation, padding=padding)
    inputs = tf.random.stateless_normal([2, length, 4], seed=[length, kernel_size])
    with tf.GradientTape() as tape:
        outputs = layer(inputs, training=training)
        loss = tf.reduce_sum(outputs * tf.range(1.0, length + 1.0)[None, :, None])
    gradient = tape.gradient(loss, layer.depthwise_kernel).numpy()
    depthwise, pointwise = layer.depthwise_kernel.numpy(), layer.pointwise_kernel.numpy()
    expected = reference(inputs.numpy(), depthwise, pointwise, dilation, padding)
    np.testing.assert_allclose(outputs.numpy(), expected, atol=1e-5)
    first, last = (int(tap) for tap in layer.reaching_taps(length))
    assert gradient.shape == depthwise.shape
    assert not np.any(gradient[:first]) and not np.any(gradient[last + 1 :])
    # Each tap's gradient is the definition's: the inputs it reads times the upstream.
    delta = 1e-2
    for tap in (first, last):
        shifted = depthwise.copy()
        shifted[tap] += delta
        change = reference(inputs.numpy(), shifted, pointwise, dilation, padding) - expected
        weights = np.arange(1.0, length + 1.0)[None, :, None]
        np.testing.assert_allclose(
            gradient[tap].sum(), (change * weights).sum() / delta, rtol=1e-3, atol=1e-3
        )


def test_inference_gathers_the_taps_of_small_inputs_only():
    """The depthwise op's graph holds one conditional (inference, by size) or none
    (training); a box passes its caller's `training` on to its convolutions."""
    box = ConvBox(4, [(3, 1), (7, 2)], padding="causal")

    def op_types(training):
        function = tf.function(lambda x: box(x, training=training))
        graph = function.get_concrete_function(tf.TensorSpec([None, None, 4])).graph
        return [op.type for op in graph.get_operations()]

    assert sum(kind in ("If", "StatelessIf") for kind in op_types(False)) == 2
    assert not any(kind in ("If", "StatelessIf") for kind in op_types(True))
    small, large = tf.ones([1, GATHERED_TAPS_POSITIONS, 4]), tf.ones([1, 65, 4])
    for inputs in (small, large):
        np.testing.assert_allclose(box(inputs), box(inputs, training=True), atol=1e-5)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="padding must be one of"):
        SeparableConv1D(4, 3, padding="valid")
    with pytest.raises(ValueError, match="groups=3"):
        SeparableConv1D(4, 3, groups=3)
    with pytest.raises(ValueError, match="do not split into 2 groups"):
        SeparableConv1D(4, 3, groups=2)(tf.ones([1, 2, 3]))
    with pytest.raises(ValueError, match="Only a causal"):
        layer = SeparableConv1D(4, 3)
        layer.build([None, None, 4])
        layer.step(tf.ones([1, 4]), tf.zeros([1, 2, 4]), None)


@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("growth", ["a column a step", "phases of 4"])
def test_a_window_grown_as_the_search_grows_it_steps_as_the_parallel_call(dilation, growth):
    # The search pads a window to min(room, window_span) before each step: in graph
    # mode a column a step, compiled in phases of fixed widths.
    layer = SeparableConv1D(6, kernel_size=4, dilation_rate=dilation, padding="causal")
    inputs = tf.random.stateless_normal([3, 11, 6], seed=[3, 4])
    parallel = layer(inputs).numpy()
    weights = layer.read_step_weights()
    window = layer.initial_window(3, 6)
    assert window.shape[1] == 0
    for t in range(inputs.shape[1]):
        room = t + 1 if growth == "a column a step" else 4 * (t // 4 + 1)
        width = min(room, layer.window_span)
        window = tf.pad(window, [[0, 0], [0, width - window.shape[1]], [0, 0]])
        output, window = layer.step(
            inputs[:, t], window, window_position(window, t, layer.window_span), weights
        )
        assert window.shape[1] == width
        np.testing.assert_allclose(output.numpy(), parallel[:, t], atol=1e-5, err_msg=f"{t}")
