"""Tests of the weights PoseNet's decoding step reads once, and of its row operations."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from convs2s_tf.decoding import Ensemble, make_inference_model
from convs2s_tf.models.families import build_model, with_family
from convs2s_tf.models.posenet.step_weights import dense_rows, norm_rows, read_dense, read_norm


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_rows_equal_the_keras_layers_bit_for_bit(policy, rng):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        dense = keras.layers.Dense(6)
        norm = keras.layers.LayerNormalization(epsilon=1e-6)
        rows = tf.constant(rng.normal(size=[5, 4]).astype("float32"))
        expected_dense = dense(rows)
        norm.build((None, 6))
        # Weights away from their initial ones and unit-free rows, as a trained model's.
        norm.gamma.assign(rng.normal(size=[6]).astype("float32"))
        norm.beta.assign(rng.normal(size=[6]).astype("float32"))
        inputs = tf.cast(expected_dense * 40.0 + 3.0, dense.compute_dtype)
        expected_norm = norm(inputs)
    finally:
        keras.config.set_dtype_policy(previous)
    cast_rows = tf.cast(rows, dense.compute_dtype)
    np.testing.assert_array_equal(dense_rows(cast_rows, read_dense(dense)), expected_dense)
    normed = norm_rows(inputs, read_norm(norm))
    assert normed.dtype == expected_norm.dtype
    np.testing.assert_array_equal(normed, expected_norm)


def _small_posenet(seed):
    tf.keras.utils.set_random_seed(seed)
    config = with_family(
        "posenet",
        dict(
            source_vocab_size=30,
            target_vocab_size=30,
            hidden_dim=8,
            encoder_layers=1,
            decoder_layers=2,
            num_heads=2,
            ffn_dim=16,
            norm_placement="pre",
            groups="2.2",
        ),
    )
    model = build_model(config)
    model(model.dummy_inputs())
    return model


@pytest.mark.parametrize("members", [1, 2], ids=["model", "ensemble"])
def test_the_search_step_reads_no_variable(members):
    # The inference model reads the step's weights where it is made; a step traced
    # after it (as the search's loop body is) holds no variable read.
    models = [_small_posenet(seed) for seed in range(members)]
    model = models[0] if members == 1 else Ensemble(models)
    inference = make_inference_model(model)
    encoded = inference.encode(tf.constant([[5, 6, 7, 2]]))
    state = inference.decoder.initial_state(2, 3)

    @tf.function
    def step(tokens, state):
        return inference.decoder.step(tokens, 1, state, encoded, beam_size=2)

    graph = step.get_concrete_function(tf.constant([4, 5]), state).graph
    reads = [op.name for op in graph.get_operations() if "Variable" in op.type]
    assert not reads
    logits, _, _ = step(tf.constant([4, 5]), state)
    reference, _, _ = model.decoder.step(tf.constant([4, 5]), 1, state, encoded, beam_size=2)
    # (Graph and eager kernels round apart by about 1e-6.)
    np.testing.assert_allclose(logits, reference, atol=1e-5)
