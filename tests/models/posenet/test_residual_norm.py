"""Tests of `ResidualNorm`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.models.posenet.residual_norm import ResidualNorm


def test_layer_contract():
    # "post": the call uses every weight. ("pre" uses its norm in `branch_input`, which
    # the next test checks.)
    inputs = tf.random.stateless_normal([2, 3, 4], seed=[9, 1])
    update = tf.random.stateless_normal([2, 3, 4], seed=[9, 2])
    run_layer_test(
        ResidualNorm,
        {"dropout": 0.1, "placement": "post"},
        [inputs, update],
        expected_output_shape=(2, 3, 4),
        expected_num_trainable_weights=2,
        expected_num_non_trainable_variables=1,  # the dropout's seed generator
        call_kwargs={"training": False},
        mixed_precision_output_dtype="bfloat16",
    )


def _layer_norm(values):
    mean, variance = values.mean(-1, keepdims=True), values.var(-1, keepdims=True)
    return (values - mean) / np.sqrt(variance + 1e-6)


def test_post_is_the_norm_of_the_sum_and_pre_normalises_the_branch(rng):
    x = rng.normal(size=[2, 3, 4]).astype("float32")
    update = rng.normal(size=[2, 3, 4]).astype("float32")
    post = ResidualNorm()
    np.testing.assert_array_equal(post.branch_input(x), x)
    np.testing.assert_allclose(post(x, update).numpy(), _layer_norm(x + update), atol=1e-5)
    pre = ResidualNorm(placement="pre")
    np.testing.assert_allclose(pre.branch_input(x).numpy(), _layer_norm(x), atol=1e-5)
    np.testing.assert_allclose(pre(x, update).numpy(), x + update, atol=1e-6)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="dropout"):
        ResidualNorm(dropout=-0.1)
    with pytest.raises(ValueError, match="placement"):
        ResidualNorm(placement="sandwich")
