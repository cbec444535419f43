"""Tests of `ConvBlock` against the design document's block rules."""

import math

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test
from helpers.models import randomize_weights

from convs2s_tf.layers import RandomBitsDropout
from convs2s_tf.models import ConvBlock, EncoderOutput


def _normal(shape, seed):
    return tf.random.stateless_normal(shape, seed=[seed, 0])


def test_encoder_block_contract():
    # Residual projection (5 -> 6) and convolution: 6 weights; padding zeroed.
    run_layer_test(
        ConvBlock,
        {"channels": 6, "kernel_width": 3, "input_channels": 4, "residual_channels": 5},
        _normal([2, 7, 4], 1),
        call_kwargs={
            "residual": _normal([2, 7, 5], 2),
            "padding_mask": tf.sequence_mask([7, 4], 7, tf.float32)[:, :, None],
        },
        expected_output_shape=(2, 7, 6),
        expected_num_trainable_weights=6,
        expected_num_non_trainable_variables=1,  # the dropout's seed state
        mixed_precision_output_dtype="bfloat16",
    )


def test_decoder_block_contract_and_step():
    # Residual projection (4 -> 6), causal convolution and attention: 3 + 3 + 6 weights.
    x, embedding = _normal([2, 5, 4], 3), _normal([2, 5, 3], 4)
    encoder_output = EncoderOutput(
        _normal([2, 6, 3], 5), _normal([2, 6, 3], 6), tf.sequence_mask([6, 2], 6)
    )

    def step(block, t, window):
        position = slice(t, t + 1)
        outputs, _, window = block.step(
            x[:, position],
            window,
            residual=x[:, position],
            target_embedding=embedding[:, position],
            encoder_output=encoder_output,
        )
        return outputs, window

    run_layer_test(
        ConvBlock,
        {
            "channels": 6,
            "kernel_width": 3,
            "input_channels": 4,
            "padding": "causal",
            "attention_embed_dim": 3,
        },
        x,
        call_kwargs={
            "residual": x,
            "target_embedding": embedding,
            "encoder_output": encoder_output,
        },
        expected_output_shape=(2, 5, 6),
        expected_num_trainable_weights=12,
        expected_num_non_trainable_variables=1,
        initial_state_fn=lambda block: block.initial_window(2),
        step_fn=step,
        mixed_precision_output_dtype="bfloat16",
    )


def _encoder_output(rng, batch, source, embed_dim):
    keys = rng.normal(size=[batch, source, embed_dim]).astype("float32")
    values = rng.normal(size=[batch, source, embed_dim]).astype("float32")
    mask = np.ones([batch, source], bool)
    mask[0, :2] = False
    return EncoderOutput(tf.constant(keys), tf.constant(values), tf.constant(mask))


def test_block_computes_glu_convolution_plus_projected_residual(rng):
    block = ConvBlock(6, 3, input_channels=4, residual_channels=5, dropout=0.2)
    block.build()
    randomize_weights(block, seed=1)
    x = rng.normal(size=[2, 7, 4]).astype("float32")
    residual = rng.normal(size=[2, 7, 5]).astype("float32")
    convolved = block.convolution(x).numpy()
    gated = convolved[..., :6] / (1.0 + np.exp(-convolved[..., 6:]))
    expected = (gated + block.projection(residual).numpy()) * math.sqrt(0.5)
    np.testing.assert_allclose(block(x, residual=residual).numpy(), expected, atol=1e-5)
    # Initialisation: v ~ N(0, sqrt(4 (1 - p) / (k c_in))) for the GLU's convolution.
    fresh = ConvBlock(256, 3, input_channels=128, residual_channels=64, dropout=0.2)
    fresh.build()
    std = np.std(fresh.convolution.kernel_v.numpy())
    assert abs(std / math.sqrt(4 * 0.8 / (3 * 128)) - 1) < 0.03
    assert abs(np.std(fresh.projection.kernel_v.numpy()) / math.sqrt(1 / 64) - 1) < 0.03


def test_block_without_residual_or_projection(rng):
    same_width = ConvBlock(4, 3, input_channels=4)
    assert same_width.projection is None
    none = ConvBlock(6, 2, input_channels=4, residual=0)
    assert none.projection is None
    x = tf.constant(rng.normal(size=[1, 5, 4]).astype("float32"))
    outputs = none(x, residual=tf.ones([1, 5, 4]) * 100.0)
    convolved = none.convolution(x).numpy()
    np.testing.assert_allclose(
        outputs.numpy(), convolved[..., :6] / (1.0 + np.exp(-convolved[..., 6:])), atol=1e-6
    )
    with pytest.raises(ValueError, match="pass `residual`"):
        same_width(x)


def test_padding_mask_zeroes_inputs_before_the_convolution(rng):
    block = ConvBlock(4, 3, input_channels=4)
    x = rng.normal(size=[1, 5, 4]).astype("float32")
    mask = np.array([0, 0, 1, 1, 1], "float32")[None, :, None]
    masked = block(x, residual=x, padding_mask=mask).numpy()
    zeroed = x * mask
    np.testing.assert_allclose(masked, block(zeroed, residual=x).numpy(), atol=1e-6)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_step_equals_call_with_attention(beam_size, rng):
    block = ConvBlock(6, 3, input_channels=4, padding="causal", attention_embed_dim=5)
    block.build()
    randomize_weights(block, seed=2)
    batch, length = 2 * beam_size, 4
    x = tf.constant(rng.normal(size=[batch, length, 4]).astype("float32"))
    embedding = tf.constant(rng.normal(size=[batch, length, 5]).astype("float32"))
    encoder_output = _encoder_output(rng, 2, 6, 5)
    # In the parallel pass every hypothesis gets its own copy of its sentence's encoding.
    repeated = EncoderOutput(*(tf.repeat(t, beam_size, axis=0) for t in encoder_output))
    parallel, weights = block(
        x,
        residual=x,
        target_embedding=embedding,
        encoder_output=repeated,
        return_attention=True,
    )
    window = block.initial_window(batch)
    for t in range(length):
        position = slice(t, t + 1)
        outputs, step_weights, window = block.step(
            x[:, position],
            window,
            residual=x[:, position],
            target_embedding=embedding[:, position],
            encoder_output=encoder_output,
            beam_size=beam_size,
        )
        np.testing.assert_allclose(outputs.numpy(), parallel.numpy()[:, position], atol=1e-5)
        np.testing.assert_allclose(step_weights.numpy(), weights.numpy()[:, position], atol=1e-6)
    assert window.shape == (batch, 2, 4)


def test_block_config_round_trip_and_shared_dropout():
    shared = RandomBitsDropout(0.3)
    block = ConvBlock(
        8,
        5,
        input_channels=6,
        residual=2,
        residual_channels=4,
        padding="causal",
        dropout=0.3,
        attention_embed_dim=7,
        dropout_layer=shared,
        name="block_3",
    )
    assert block.dropout_layer is shared
    config = block.get_config()
    clone = ConvBlock.from_config(config)
    assert clone.get_config() == config
    assert clone.dropout_layer is not shared and clone.dropout_layer.rate == 0.3
    assert clone.compute_output_shape((2, 9, 6)) == (2, 9, 8)
