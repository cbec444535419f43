"""The optimisers and warm-ups a run can choose: NAG, Adam(W), exponential and Noam."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.synthetic import dataset, make_trainer

from convs2s_tf.training import TrainingConfig
from convs2s_tf.training.fused_adam import FusedAdam
from convs2s_tf.training.fused_sgd import FusedSGD
from convs2s_tf.training.optimizers import make_optimizer
from convs2s_tf.training.warmup import warmup_factor


def test_exponential_warmup_is_tensor2tensors():
    # 0.01 ** ((W - step) / W) before W updates, then 1.
    factors = [float(warmup_factor("exponential", step, 100)) for step in (0, 50, 99, 100, 10**6)]
    np.testing.assert_allclose(factors, [0.01, 0.1, 0.01**0.01, 1.0, 1.0], rtol=1e-5)


def test_noam_warmup_peaks_at_one_then_decays_as_inverse_square_root():
    factors = [float(warmup_factor("noam", step, 100)) for step in (0, 49, 99, 399, 9999)]
    np.testing.assert_allclose(factors, [0.01, 0.5, 1.0, 0.5, 0.1], rtol=1e-5)
    assert float(warmup_factor("none", 7, 100)) == 1.0
    with pytest.raises(ValueError, match="warmup must be one of"):
        warmup_factor("linear", 0, 100)


def test_the_config_names_the_optimiser():
    nag = make_optimizer(TrainingConfig())
    assert isinstance(nag, FusedSGD) and nag.nesterov and nag.weight_decay is None
    adam = make_optimizer(
        TrainingConfig(
            optimizer="adam",
            learning_rate=1e-3,
            adam_beta1=0.85,
            adam_beta2=0.997,
            adam_epsilon=1e-6,
            weight_decay=0.01,
        )
    )
    assert isinstance(adam, FusedAdam)
    assert (adam.beta_1, adam.beta_2, adam.epsilon, adam.weight_decay) == (0.85, 0.997, 1e-6, 0.01)
    for bad, message in (
        (dict(optimizer="sgd"), "optimizer must be nag or adam"),
        (dict(warmup="cosine"), "warmup must be one of"),
        (dict(adam_beta2=1.0), "adam_beta1 and adam_beta2"),
        (dict(warmup_steps=0), "warmup_steps"),
        (dict(weight_decay=-1.0), "weight_decay"),
    ):
        with pytest.raises(ValueError, match=message):
            TrainingConfig(**bad).validate()


@pytest.mark.slow  # over ten seconds on 2 cores
def test_adam_with_noam_warmup_trains_at_the_warmed_up_rates(tmp_path):
    trainer = make_trainer(
        tmp_path, optimizer="adam", learning_rate=1e-2, warmup="noam", warmup_steps=4
    )
    batches = trainer.strategy.experimental_distribute_dataset(dataset(seed=5, batches=12))
    trainer._build_steps(batches.element_spec)
    losses, rates = [], []
    for step, batch in enumerate(batches):
        losses.append(float(trainer._train_step(batch)["loss"]))
        rates.append(float(trainer.optimizer.learning_rate.numpy()))
        expected = 1e-2 * float(warmup_factor("noam", step, 4))
        assert rates[-1] == pytest.approx(expected, rel=1e-5)
    assert max(rates) == pytest.approx(1e-2, rel=1e-5)  # the peak, at update 4
    assert losses[-1] < losses[0] - 0.1


def test_weight_decay_shrinks_weights_without_gradient():
    for optimizer in ("nag", "adam"):
        decaying = make_optimizer(
            TrainingConfig(optimizer=optimizer, learning_rate=0.1, weight_decay=0.5)
        )
        variable = keras.Variable([2.0, -4.0])
        decaying.apply([tf.zeros([2])], [variable])
        # Decoupled: w -= lr * decay * w, whatever the gradient.
        np.testing.assert_allclose(variable.numpy(), [2.0 * 0.95, -4.0 * 0.95], rtol=1e-6)
