"""Tests of `WeightNormDense`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test
from helpers.weight_norm import check_weight_norm

from convs2s_tf.layers import WeightNormDense


@pytest.mark.parametrize(
    "init_kwargs, trainable_weights",
    [({"units": 5, "stddev": 0.2}, 3), ({"units": 7, "use_bias": False, "name": "dense"}, 2)],
    ids=["bias", "no_bias"],
)
def test_layer_contract(init_kwargs, trainable_weights):
    run_layer_test(
        WeightNormDense,
        init_kwargs,
        tf.random.stateless_normal([2, 3, 4], seed=[1, 2]),
        expected_output_shape=(2, 3, init_kwargs["units"]),
        expected_num_trainable_weights=trainable_weights,
        mixed_precision_output_dtype="bfloat16",
    )


def test_weight_norm_effective_weight(rng):
    check_weight_norm(
        WeightNormDense(5, stddev=0.2), np.ones([2, 3, 4], "float32"), norm_axes=(0,), rng=rng
    )


def test_weight_norm_dense_matches_matmul(rng):
    layer = WeightNormDense(3)
    inputs = rng.normal(size=[4, 2, 5]).astype("float32")
    layer(inputs)
    layer.bias.assign(rng.normal(size=[3]).astype("float32"))
    expected = inputs @ layer.kernel.numpy() + layer.bias.numpy()
    np.testing.assert_allclose(layer(inputs).numpy(), expected, rtol=1e-5, atol=1e-5)
