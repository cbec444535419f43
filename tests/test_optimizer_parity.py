"""The optimiser against the authors' own (fairseq's NAG, torch) across rate changes.

Needs the `parity` extra; skipped without it, except under CI (CI=true).
"""

import numpy as np
import pytest
from helpers.parity import require_fairseq

require_fairseq()

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
from fairseq.optim.nag import NAG  # noqa: E402

from convs2s_tf.training.fused_sgd import FusedSGD  # noqa: E402

# Two rate changes: a plateau shrink, then another rate as on a resumed run.
RATES = [0.25] * 5 + [0.025] * 5 + [0.1] * 5


def _fairseq_weights(initial, gradients):
    parameters = [torch.nn.Parameter(torch.tensor(w, dtype=torch.float64)) for w in initial]
    optimizer = NAG(parameters, lr=RATES[0], momentum=0.99)
    for step_gradients, rate in zip(gradients, RATES):
        for group in optimizer.param_groups:
            group["lr"] = rate
        for parameter, gradient in zip(parameters, step_gradients):
            parameter.grad = torch.tensor(gradient, dtype=torch.float64)
        optimizer.step()
    return [p.detach().numpy() for p in parameters]


def _as_gradient(values, sparse):
    gradient = tf.convert_to_tensor(values)
    if not sparse:
        return gradient
    # Sparse gradients take Keras' own SGD update rather than the fused kernel.
    rows = tf.range(tf.shape(gradient)[0])
    return tf.IndexedSlices(gradient, rows, tf.shape(gradient, out_type=tf.int64))


def _our_weights(initial, gradients, sparse, traced):
    variables = [keras.Variable(w) for w in initial]
    optimizer = FusedSGD(learning_rate=RATES[0], momentum=0.99, nesterov=True)

    def apply(*step_gradients):
        optimizer.apply([_as_gradient(g, sparse) for g in step_gradients], variables)

    if traced:
        apply = tf.function(apply)
    for step_gradients, rate in zip(gradients, RATES):
        optimizer.learning_rate.assign(rate)
        apply(*[tf.constant(g) for g in step_gradients])
    return [v.numpy() for v in variables]


@pytest.mark.parametrize("sparse", [False, True], ids=["fused", "keras"])
@pytest.mark.parametrize("traced", [False, True], ids=["eager", "tf_function"])
def test_matches_fairseq_nag_across_rate_changes(sparse, traced):
    rng = np.random.default_rng(0)
    initial = [rng.normal(size=[4, 3]).astype("float32"), rng.normal(size=[6]).astype("float32")]
    gradients = [[rng.normal(size=w.shape).astype("float32") for w in initial] for _ in RATES]
    ours = _our_weights(initial, gradients, sparse, traced)
    expected = _fairseq_weights(initial, gradients)
    for actual, reference, start in zip(ours, expected, initial):
        np.testing.assert_allclose(actual, reference, atol=1e-6, rtol=0)
        assert abs(actual - start).max() > 1e-2  # the weights did move
