"""Tests of `FusedSGD` against Keras' SGD (fairseq parity: tests/test_optimizer_parity.py)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_serialization_test

from convs2s_tf.training.fused_sgd import FusedSGD


def test_config_and_serialization_round_trip():
    run_serialization_test(FusedSGD(learning_rate=0.25, momentum=0.99, nesterov=True))


@pytest.mark.parametrize("nesterov", [True, False])
def test_fused_sgd_matches_keras_sgd(rng, nesterov):
    initial = [rng.normal(size=[3, 4]).astype("float32"), rng.normal(size=[5]).astype("float32")]
    reference = [keras.Variable(v) for v in initial]
    fused = [keras.Variable(v) for v in initial]
    reference_optimizer = keras.optimizers.SGD(0.25, momentum=0.99, nesterov=nesterov)
    fused_optimizer = FusedSGD(learning_rate=0.25, momentum=0.99, nesterov=nesterov)
    for _ in range(4):
        gradients = [tf.constant(rng.normal(size=v.shape).astype("float32")) for v in initial]
        reference_optimizer.apply(gradients, reference)
        fused_optimizer.apply(gradients, fused)
    for expected, actual in zip(
        reference + reference_optimizer.variables, fused + fused_optimizer.variables
    ):
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)
    assert abs(fused[0].numpy() - initial[0]).max() > 1e-2  # the variables did move
