"""Tests of the plateau schedule: the rate shrinks without improvement, momentum follows."""

import os

import numpy as np
import pytest
from helpers.synthetic import EpochBatches, dataset, make_trainer

from convs2s_tf.training.plateau import anneal_learning_rate


@pytest.mark.slow  # over ten seconds on 2 cores
def test_learning_rate_shrinks_on_plateau_and_stops(tmp_path):
    trainer = make_trainer(
        tmp_path,
        learning_rate=0.25,
        min_learning_rate=0.002,
        save_every_steps=0,
        valid_beam_size=0,
    )
    result = trainer.train(
        EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=2, sentences=3)),
        valid_dataset=dataset(seed=99, batches=1),
    )
    # Validation perplexity can only improve for a while; each epoch without improvement
    # divides the rate by 10 until it is below the floor: 0.25 -> 0.025 -> 0.0025 -> stop.
    assert result["stop_reason"].startswith("learning rate reached the floor")
    assert result["learning_rate"] == pytest.approx(0.00025, rel=1e-5)
    assert float(trainer.optimizer.learning_rate.numpy()) == pytest.approx(0.00025, rel=1e-5)
    assert os.path.exists(tmp_path / "best" / "checkpoint")


def test_step_after_a_shrink_moves_by_the_new_rate(tmp_path):
    trainer = make_trainer(tmp_path, max_epochs=1, save_every_steps=0, clip_norm=0.0)
    trainer.train(EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=3)))
    # An epoch end without improvement: 0.25 -> 0.025.
    trainer.schedule.best.assign(0.0)
    anneal_learning_rate(trainer.schedule, trainer.state.learning_rate, trainer.optimizer, 5.0)
    assert float(trainer.optimizer.learning_rate.numpy()) == pytest.approx(0.025)
    trainer.save()
    weights = [w.numpy() for w in trainer.model.trainable_variables]
    velocity = [m.numpy() for m in trainer.optimizer.momentums]
    trainer.config.max_epochs, trainer.config.max_steps = 2, int(trainer.state.step.numpy()) + 1
    trainer.train(EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=3)))
    momentum, ratio = 0.99, 0.1
    for w0, m0, variable, slot in zip(
        weights, velocity, trainer.model.trainable_variables, trainer.optimizer.momentums
    ):
        m1, w1 = slot.numpy(), variable.numpy()
        # fairseq's NAG: m1 = momentum * ratio * m0 - lr * g and w1 = w0 + momentum * m1 -
        # lr * g, so w1 - w0 = (1 + momentum) * m1 - momentum * ratio * m0. Without the
        # rescaling the old velocity m0 would enter unscaled.
        expected = (1 + momentum) * m1 - momentum * ratio * m0
        np.testing.assert_allclose(w1 - w0, expected, atol=1e-6)
        if abs(m0).max() > 1e-3:
            assert abs((1 + momentum) * m1 - momentum * m0 - (w1 - w0)).max() > 1e-4


def test_cooldown_shrinks_the_rate_once_and_the_checkpoint_keeps_it(tmp_path):
    config = dict(max_epochs=3, save_every_steps=0, valid_beam_size=0, lr_patience=100)
    trainer = make_trainer(tmp_path, **config)
    rates = []

    def cooldown_from_second_epoch_end():
        rates.append(float(trainer.state.learning_rate.numpy()))
        return len(rates) >= 2

    trainer.cooldown_condition = cooldown_from_second_epoch_end
    result = trainer.train(
        EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=2)),
        valid_dataset=dataset(seed=99, batches=1),
    )
    # Checked at each epoch end until it holds, then no more: 0.25 -> 0.025, once,
    # although the condition would hold at the third epoch end too.
    assert rates == pytest.approx([0.25, 0.25])
    assert result["learning_rate"] == pytest.approx(0.025)
    assert float(trainer.optimizer.learning_rate.numpy()) == pytest.approx(0.025)
    restored = make_trainer(tmp_path, **config)
    restored.restore_or_initialize()
    assert float(restored.state.learning_rate.numpy()) == pytest.approx(0.025)
