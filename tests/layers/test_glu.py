"""Tests of `GLU`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.layers import GLU


@pytest.mark.parametrize(
    "init_kwargs, input_shape, output_shape",
    [({}, (2, 3, 8), (2, 3, 4)), ({"axis": 1}, (2, 6, 3), (2, 3, 3))],
    ids=["last_axis", "axis_1"],
)
def test_layer_contract(init_kwargs, input_shape, output_shape):
    run_layer_test(
        GLU,
        init_kwargs,
        tf.random.stateless_normal(input_shape, seed=[3, 4]),
        expected_output_shape=output_shape,
        mixed_precision_output_dtype="bfloat16",
    )


def test_glu_halves(rng):
    inputs = rng.normal(size=[2, 3, 8]).astype("float32")
    a, b = inputs[..., :4], inputs[..., 4:]
    np.testing.assert_allclose(GLU()(inputs).numpy(), a / (1 + np.exp(-b)), rtol=1e-5)
    with pytest.raises(ValueError, match="even"):
        GLU()(tf.ones([2, 3]))
