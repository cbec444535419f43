"""Unit tests of the ConvS2S Keras layers."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from convs2s_tf.layers import (
    GLU,
    GradientScale,
    LearnedPositionalEmbedding,
    MultiStepAttention,
    PaddedNormal,
    RandomBitsDropout,
    WeightNormConv1D,
    WeightNormDense,
    scale_gradient,
)


def _effective_weight(v, g, axes):
    return g * v / np.sqrt(np.sum(v**2, axis=axes, keepdims=True))


@pytest.mark.parametrize(
    "layer, inputs, norm_axes",
    [
        (WeightNormDense(5, stddev=0.2), np.ones([2, 3, 4], "float32"), (0,)),
        (WeightNormConv1D(6, 3, padding="same", stddev=0.2), np.ones([2, 7, 4], "float32"), (0, 1)),
    ],
)
def test_weight_norm_effective_weight(layer, inputs, norm_axes, rng):
    layer(inputs)
    v = layer.kernel_v.numpy()
    # At construction g = ||v||, so the effective weight is v itself.
    np.testing.assert_allclose(layer.kernel.numpy(), v, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        layer.kernel_g.numpy(),
        np.sqrt(np.sum(v**2, axis=norm_axes)),
        rtol=1e-6,
    )
    new_g = rng.uniform(0.5, 2.0, size=layer.kernel_g.shape).astype("float32")
    layer.kernel_g.assign(new_g)
    np.testing.assert_allclose(
        layer.kernel.numpy(), _effective_weight(v, new_g, norm_axes), rtol=1e-5, atol=1e-6
    )
    # The layer computes with the effective weight.
    outputs = layer(inputs).numpy()
    assert not np.allclose(outputs, 0.0)


def test_weight_norm_dense_matches_matmul(rng):
    layer = WeightNormDense(3)
    inputs = rng.normal(size=[4, 2, 5]).astype("float32")
    layer(inputs)
    layer.bias.assign(rng.normal(size=[3]).astype("float32"))
    expected = inputs @ layer.kernel.numpy() + layer.bias.numpy()
    np.testing.assert_allclose(layer(inputs).numpy(), expected, rtol=1e-5, atol=1e-5)


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


def test_glu_halves(rng):
    inputs = rng.normal(size=[2, 3, 8]).astype("float32")
    a, b = inputs[..., :4], inputs[..., 4:]
    np.testing.assert_allclose(GLU()(inputs).numpy(), a / (1 + np.exp(-b)), rtol=1e-5)
    with pytest.raises(ValueError, match="even"):
        GLU()(tf.ones([2, 3]))


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


def test_positions_ignore_left_padding():
    layer = LearnedPositionalEmbedding(max_positions=16, output_dim=4, pad_id=1)
    tokens = tf.constant([[1, 1, 7, 8, 2], [7, 8, 2, 1, 1], [7, 8, 9, 10, 2]])
    np.testing.assert_array_equal(
        layer.positions(tokens).numpy(), [[1, 1, 2, 3, 4], [2, 3, 4, 1, 1], [2, 3, 4, 5, 6]]
    )
    embedded = layer(tokens).numpy()
    np.testing.assert_allclose(embedded[0, 2:], embedded[1, :3])
    # The pad row is zero, so pad positions embed to zero.
    np.testing.assert_array_equal(embedded[0, :2], 0.0)
    # Incremental decoding: step t is at position pad + 1 + t.
    np.testing.assert_allclose(layer.step_embedding(2).numpy(), embedded[2, 2])
    assert layer.max_length == 14


def test_padded_normal_zero_row_and_std():
    table = PaddedNormal(stddev=0.1, pad_id=1, seed=3)((2000, 64)).numpy()
    np.testing.assert_array_equal(table[1], 0.0)
    assert abs(np.delete(table, 1, axis=0).std() - 0.1) < 0.003


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


@pytest.mark.parametrize(
    "layer",
    [
        WeightNormDense(7, stddev=0.3, use_bias=False, name="dense"),
        WeightNormConv1D(8, 2, padding="causal", stddev=0.2, name="conv"),
        GLU(axis=1),
        GradientScale(0.25),
        LearnedPositionalEmbedding(32, 8, pad_id=1, stddev=0.05),
        MultiStepAttention(6, 4),
    ],
    ids=lambda layer: type(layer).__name__,
)
def test_layer_config_round_trip(layer):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is type(layer)
    assert restored.get_config() == config


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
