"""Tests of `LearnedPositionalEmbedding`."""

import numpy as np
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.layers import LearnedPositionalEmbedding


def test_layer_contract():
    # No padding: token t is at position pad + 1 + t, the position `step_embedding(t)`
    # embeds in incremental decoding.
    tokens = tf.constant([[5, 6, 7, 2], [8, 9, 2, 4]])
    run_layer_test(
        LearnedPositionalEmbedding,
        {"max_positions": 32, "output_dim": 8, "pad_id": 1, "stddev": 0.05},
        tokens,
        expected_output_shape=(2, 4, 8),
        expected_num_trainable_weights=1,
        step_fn=lambda layer, t, state: (tf.broadcast_to(layer.step_embedding(t), [2, 8]), state),
        mixed_precision_output_dtype="bfloat16",
    )


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
