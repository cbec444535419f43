"""Tests of `PositionwiseFFN`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.models.posenet.positionwise_ffn import PositionwiseFFN


@pytest.mark.parametrize(
    "init_kwargs, weights, output_width",
    [
        ({"hidden_dim": 16}, 4, 6),
        ({"hidden_dim": 8, "num_layers": 3, "output_dim": 5, "dropout": 0.1}, 6, 5),
    ],
    ids=["n2", "n3"],
)
def test_layer_contract(init_kwargs, weights, output_width):
    inputs = tf.random.stateless_normal([2, 3, 6], seed=[5, 6])
    run_layer_test(
        PositionwiseFFN,
        init_kwargs,
        inputs,
        expected_output_shape=(2, 3, output_width),
        expected_num_trainable_weights=weights,
        expected_num_non_trainable_variables=1,  # the dropout's seed generator
        call_kwargs={"training": False},
        mixed_precision_output_dtype="bfloat16",
    )


def test_linear_maps_with_relu_between(rng):
    ffn = PositionwiseFFN(hidden_dim=5, num_layers=2)
    inputs = rng.normal(size=[2, 3, 4]).astype("float32")
    outputs = ffn(inputs).numpy()
    (w1, b1), (w2, b2) = [(d.kernel.numpy(), d.bias.numpy()) for d in ffn.maps]
    np.testing.assert_allclose(outputs, np.maximum(inputs @ w1 + b1, 0) @ w2 + b2, atol=1e-5)
    # Position-wise: one position alone gives the same output.
    np.testing.assert_allclose(ffn(inputs[:, 1:2]).numpy()[:, 0], outputs[:, 1], atol=1e-6)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="num_layers"):
        PositionwiseFFN(4, num_layers=0)
    with pytest.raises(ValueError, match="dropout"):
        PositionwiseFFN(4, dropout=1.0)
