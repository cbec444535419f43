"""Tests of `PostNormSublayer`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.layers import PostNormSublayer


def test_layer_contract():
    inputs = tf.random.stateless_normal([2, 3, 4], seed=[9, 1])
    update = tf.random.stateless_normal([2, 3, 4], seed=[9, 2])
    run_layer_test(
        PostNormSublayer,
        {"dropout": 0.1},
        [inputs, update],
        expected_output_shape=(2, 3, 4),
        expected_num_trainable_weights=2,
        expected_num_non_trainable_variables=1,  # the dropout's seed generator
        call_kwargs={"training": False},
        mixed_precision_output_dtype="bfloat16",
    )


def test_norm_of_the_sum(rng):
    layer = PostNormSublayer()
    x, update = rng.normal(size=[2, 3, 4]).astype("float32"), rng.normal(size=[2, 3, 4]).astype(
        "float32"
    )
    total = x + update
    mean, variance = total.mean(-1, keepdims=True), total.var(-1, keepdims=True)
    expected = (total - mean) / np.sqrt(variance + 1e-6)
    np.testing.assert_allclose(layer(x, update).numpy(), expected, atol=1e-5)
    with pytest.raises(ValueError, match="dropout"):
        PostNormSublayer(dropout=-0.1)
