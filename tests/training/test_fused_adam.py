"""Tests of `FusedAdam` against Keras' Adam."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_serialization_test

from convs2s_tf.training.fused_adam import FusedAdam


def test_config_and_serialization_round_trip():
    run_serialization_test(FusedAdam(learning_rate=2e-3, beta_2=0.98, epsilon=1e-9))


def _gradient(values, sparse):
    if not sparse:
        return tf.constant(values)
    # An embedding's gradient: rows of a table, one of them twice, one absent.
    rows = [0, 2, 2] if values.ndim == 2 else [0, 1, 1]
    return tf.IndexedSlices(tf.constant(values[rows]), tf.constant(rows), tf.constant(values.shape))


@pytest.mark.parametrize("weight_decay", [None, 0.01])
@pytest.mark.parametrize("sparse", [False, True])
def test_fused_adam_matches_keras_adam(rng, weight_decay, sparse):
    initial = [rng.normal(size=[3, 4]).astype("float32"), rng.normal(size=[5]).astype("float32")]
    reference = [keras.Variable(v) for v in initial]
    fused = [keras.Variable(v) for v in initial]
    settings = dict(beta_1=0.9, beta_2=0.98, epsilon=1e-9, weight_decay=weight_decay)
    reference_optimizer = keras.optimizers.Adam(learning_rate=2e-3, **settings)
    fused_optimizer = FusedAdam(learning_rate=2e-3, **settings)
    # A changing rate, as the warm-up sets it every update.
    for rate in (2e-3, 1e-3, 5e-4, 5e-4, 1e-2):
        reference_optimizer.learning_rate = fused_optimizer.learning_rate = rate
        gradients = [rng.normal(size=v.shape).astype("float32") for v in initial]
        # A sparse gradient is Adam's of the dense one (as the trainer's, densified).
        dense = [tf.convert_to_tensor(_gradient(g, sparse)) for g in gradients]
        reference_optimizer.apply(dense, reference)
        fused_optimizer.apply([_gradient(g, sparse) for g in gradients], fused)
    for expected, actual in zip(
        reference + reference_optimizer.variables, fused + fused_optimizer.variables
    ):
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    assert abs(fused[0].numpy() - initial[0]).max() > 1e-2  # the variables did move


def test_checkpoints_of_keras_adam_resume_in_fused_adam(rng, tmp_path):
    initial = rng.normal(size=[6]).astype("float32")
    gradients = [rng.normal(size=[6]).astype("float32") for _ in range(4)]
    reference, saved = keras.Variable(initial), keras.Variable(initial)
    reference_optimizer, saved_optimizer = keras.optimizers.Adam(0.01), keras.optimizers.Adam(0.01)
    for gradient in gradients[:2]:
        reference_optimizer.apply([tf.constant(gradient)], [reference])
        saved_optimizer.apply([tf.constant(gradient)], [saved])
    path = tf.train.Checkpoint(variable=saved.value, optimizer=saved_optimizer).save(
        str(tmp_path / "ckpt")
    )
    resumed, resumed_optimizer = keras.Variable(np.zeros(6, "float32")), FusedAdam(
        learning_rate=0.01
    )
    resumed_optimizer.build([resumed])
    tf.train.Checkpoint(variable=resumed.value, optimizer=resumed_optimizer).restore(path)
    for gradient in gradients[2:]:
        reference_optimizer.apply([tf.constant(gradient)], [reference])
        resumed_optimizer.apply([tf.constant(gradient)], [resumed])
    np.testing.assert_allclose(resumed.numpy(), reference.numpy(), rtol=1e-5, atol=1e-6)


def test_amsgrad_is_refused():
    with pytest.raises(ValueError, match="no amsgrad"):
        FusedAdam(learning_rate=1e-3, amsgrad=True)
