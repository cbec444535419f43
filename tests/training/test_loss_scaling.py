"""float16 training with dynamic loss scaling: it follows float32, and skips overflows."""

import numpy as np
import pytest
from helpers.synthetic import dataset, make_trainer


def train_losses(trainer, batches):
    distributed = trainer.strategy.experimental_distribute_dataset(batches)
    trainer._build_steps(distributed.element_spec)
    return [trainer._train_step(batch) for batch in distributed]


@pytest.mark.slow  # over ten seconds on 2 cores
def test_float16_loss_follows_float32_within_tolerance(tmp_path):
    batches = dataset(seed=3, batches=20)
    losses = {}
    for dtype in ("float32", "float16"):
        trainer = make_trainer(tmp_path / dtype, dtype=dtype)
        if trainer.loss_scale is not None:
            # Low enough that no step overflows, so both runs take the same updates
            # (from Keras' 2**15 the first steps overflow, are skipped and halve it).
            trainer.loss_scale.scale.assign(2.0**10)
        results = train_losses(trainer, batches)
        assert all(bool(result["applied"]) for result in results)
        losses[dtype] = np.array([float(result["loss"]) for result in results])
    assert losses["float32"][-1] < losses["float32"][0] - 0.1  # it really trains
    # float16 products (10-bit mantissas) against float32 ones: within 2% per step.
    np.testing.assert_allclose(losses["float16"], losses["float32"], rtol=0.02)


@pytest.mark.slow  # over ten seconds on 2 cores
def test_overflow_step_is_skipped_and_halves_the_scale(tmp_path):
    trainer = make_trainer(tmp_path, dtype="float16")
    batches = dataset(seed=4, batches=2)
    before = [w.numpy().copy() for w in trainer.model.trainable_weights]
    trainer.loss_scale.scale.assign(2.0**40)  # scaled gradients overflow float16
    overflow = train_losses(trainer, batches.take(1))[0]
    assert not bool(overflow["applied"])
    assert float(trainer.loss_scale.scale.numpy()) == 2.0**39
    for old, new in zip(before, trainer.model.trainable_weights):
        np.testing.assert_array_equal(old, new.numpy())  # nothing applied
    trainer.loss_scale.scale.assign(2.0**8)
    applied = train_losses(trainer, batches.skip(1))[0]
    assert bool(applied["applied"]) and np.isfinite(float(applied["gradient_norm"]))
    assert any(
        not np.array_equal(old, new.numpy())
        for old, new in zip(before, trainer.model.trainable_weights)
    )
