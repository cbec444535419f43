"""Tests of the divergence guard: non-finite updates are skipped, then training stops."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.synthetic import EpochBatches, dataset, make_trainer

from convs2s_tf.training import TrainingDivergedError


def test_nonfinite_loss_skips_update_then_stops(tmp_path):
    trainer = make_trainer(tmp_path, max_nonfinite_steps=3, max_steps=10, save_every_steps=0)
    gain = trainer.model.decoder.output_projection.kernel_g
    gain.assign(tf.fill(gain.shape, float("nan")))
    before = [w.numpy() for w in trainer.model.trainable_weights]
    with pytest.raises(TrainingDivergedError, match="3 consecutive updates"):
        trainer.train(EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=5)))
    after = [w.numpy() for w in trainer.model.trainable_weights]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
    assert int(trainer.state.step.numpy()) == 3
