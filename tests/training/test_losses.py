"""Tests of the training losses against the reference (oracle) losses of the tests."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.reference_losses import flat_token_losses, token_losses

from convs2s_tf.training.losses import TOKEN_BUCKET, bucketed_token_count, fused_token_losses


def test_token_losses_match_reference(rng):
    logits = rng.normal(size=[2, 3, 7]).astype("float32")
    targets = np.array([[4, 5, 2], [6, 2, 1]], "int32")
    loss_sum, nll_sum, tokens = token_losses(logits, targets, label_smoothing=0.1)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    mask = targets != 1
    nll = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    smooth = -log_probs.sum(-1)
    eps_i = 0.1 / 6
    expected = ((1 - 0.1 - eps_i) * nll + eps_i * smooth)[mask].sum()
    assert float(tokens) == 5.0
    assert float(nll_sum) == pytest.approx(nll[mask].sum(), rel=1e-5)
    assert float(loss_sum) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_token_losses_match_flat_token_losses(rng, dtype):
    """The XLA loss (bias added inside, padding rows weighed 0) and its gradients equal
    the graph-mode loss of `logits + bias`."""
    rows, vocab = 70, 53
    logits = tf.cast(rng.normal(size=[rows, vocab]).astype("float32") * 3, dtype)
    bias = tf.constant(rng.normal(size=[vocab]).astype("float32"))
    targets = tf.constant(rng.integers(0, vocab, size=[rows]).astype("int32"))
    real = 61  # rows 61..69 are bucket padding
    weights = tf.sequence_mask(real, rows, tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([logits, bias])
        loss_sum, nll_sum = fused_token_losses(logits, bias, targets, weights, 0.1)
        full = tf.cast(logits, tf.float32) + bias
        expected_loss, expected_nll, _ = flat_token_losses(full[:real], targets[:real], 0.1)
    tolerance = 1e-5 if dtype == "float32" else 1e-4
    assert float(loss_sum) == pytest.approx(float(expected_loss), rel=tolerance)
    assert float(nll_sum) == pytest.approx(float(expected_nll), rel=tolerance)
    logits_gradient, bias_gradient = tape.gradient(loss_sum, [logits, bias])
    expected_logits_gradient, expected_bias_gradient = tape.gradient(expected_loss, [logits, bias])
    assert logits_gradient.dtype == logits.dtype
    np.testing.assert_allclose(
        tf.cast(logits_gradient, tf.float32),
        tf.cast(expected_logits_gradient, tf.float32),
        atol=1e-6 if dtype == "float32" else 4e-3,
    )
    np.testing.assert_array_equal(logits_gradient[real:], 0)  # padding rows: no gradient
    np.testing.assert_allclose(bias_gradient, expected_bias_gradient, atol=1e-5)
    assert bucketed_token_count(tf.constant(0)) == 0
    assert bucketed_token_count(tf.constant(1)) == TOKEN_BUCKET
    assert bucketed_token_count(tf.constant(TOKEN_BUCKET + 1)) == 2 * TOKEN_BUCKET


def test_fused_loss_gradient_matches_autodiff(rng):
    logits = tf.constant(rng.normal(size=[6, 9]).astype("float32"))
    targets = tf.constant([4, 5, 2, 6, 1, 8])
    weights = tf.constant(rng.normal(size=[]).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss, _, _ = token_losses(logits, targets, label_smoothing=0.2)
        loss = loss * weights
    fused = tf.convert_to_tensor(tape.gradient(loss, logits)).numpy()
    with tf.GradientTape() as tape:
        tape.watch(logits)
        log_probs = tf.nn.log_softmax(logits)
        mask = tf.cast(targets != 1, tf.float32)
        nll = -tf.gather(log_probs, tf.where(targets == 1, 0, targets), batch_dims=1)
        eps_i = 0.2 / 8
        per_token = (1 - 0.2 - eps_i) * nll - eps_i * tf.reduce_sum(log_probs, -1)
        reference = tf.reduce_sum(per_token * mask) * weights
    np.testing.assert_allclose(fused, tape.gradient(reference, logits).numpy(), atol=1e-6)
    assert float(loss) == pytest.approx(float(reference), rel=1e-5)
