"""Tests of `MultiHeadAttention`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.models.posenet.multi_head_attention import MultiHeadAttention


def test_layer_contract_and_causal_step():
    query = tf.random.stateless_normal([2, 5, 8], seed=[1, 3])
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "dropout": 0.2},
        [query],
        expected_output_shape=(2, 5, 8),
        expected_num_trainable_weights=8,
        expected_num_non_trainable_variables=1,  # the dropout's seed generator
        call_kwargs={"causal": True, "training": False},
        initial_state_fn=lambda layer: layer.initial_cache(2, 7),  # longer than the input
        step_fn=lambda layer, t, cache: layer.step(query[:, t], cache, t),
        mixed_precision_output_dtype="bfloat16",
    )


def test_matches_the_definition(rng):
    attention = MultiHeadAttention(num_heads=2)
    query = rng.normal(size=[1, 3, 4]).astype("float32")
    memory = rng.normal(size=[1, 5, 4]).astype("float32")
    outputs, weights = attention(query, memory, return_weights=True)

    def dense(layer, x):
        return x @ layer.kernel.numpy() + layer.bias.numpy()

    q, k, v = (
        dense(m, x)
        for m, x in (
            (attention.query_map, query),
            (attention.key_map, memory),
            (attention.value_map, memory),
        )
    )
    heads = []
    all_weights = []
    for h in range(2):
        part = slice(2 * h, 2 * h + 2)
        logits = q[0, :, part] @ k[0, :, part].T / np.sqrt(2.0)
        w = np.exp(logits - logits.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        all_weights.append(w)
        heads.append(w @ v[0, :, part])
    expected = dense(attention.output_map, np.concatenate(heads, -1)[None])
    np.testing.assert_allclose(outputs.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(weights.numpy()[0], np.mean(all_weights, 0), atol=1e-6)


def test_padding_is_never_attended(rng):
    attention = MultiHeadAttention(num_heads=2)
    query = rng.normal(size=[1, 2, 4]).astype("float32")
    memory = rng.normal(size=[1, 5, 4]).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0]], "float32")
    outputs, weights = attention(query, memory, padding_mask=mask, return_weights=True)
    assert np.all(weights.numpy()[..., 3:] < 1e-6)
    changed = memory.copy()
    changed[:, 3:] = 50.0
    np.testing.assert_allclose(
        attention(query, changed, padding_mask=mask).numpy(), outputs.numpy(), atol=1e-5
    )


def test_cross_attention_steps_group_hypotheses_by_sentence(rng):
    attention = MultiHeadAttention(num_heads=2)
    memory = rng.normal(size=[2, 4, 8]).astype("float32")  # two sentences
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], "float32")
    queries = rng.normal(size=[2, 3, 8]).astype("float32")  # three hypotheses each
    parallel, parallel_weights = attention(queries, memory, padding_mask=mask, return_weights=True)
    keys, values = attention.step_memory(memory)
    assert keys.shape == (2, 2, 4, 4)  # head-major: [sentences, heads, source, head_dim]
    bias = attention.padding_bias(mask, 4, keys.dtype)
    flat = queries.reshape(6, 8)
    stepped, weights = attention.attend_memory(
        flat, keys, values, bias, beam_size=3, return_weights=True
    )
    np.testing.assert_allclose(stepped.numpy().reshape(2, 3, 8), parallel.numpy(), atol=1e-5)
    np.testing.assert_allclose(
        weights.numpy().reshape(2, 3, 4), parallel_weights.numpy(), atol=1e-6
    )


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(0)
    with pytest.raises(ValueError, match="does not split into 3 heads"):
        MultiHeadAttention(3)(tf.ones([1, 2, 8]))
