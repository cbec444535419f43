"""A SIGTERM outside the training step: during validation it abandons the pass, saves the
epoch's steps and stops; the resumed run validates that epoch end again, and only it."""

import os
import signal

import pytest
from helpers.synthetic import EpochBatches, dataset, make_trainer

from convs2s_tf.training.trainer import PREEMPTED

CONFIG = dict(max_epochs=2, save_every_steps=0, valid_beam_size=0, lr_patience=100)


def _train(trainer):
    return trainer.train(
        EpochBatches(lambda epoch, context: dataset(seed=epoch, batches=2, sentences=3)),
        valid_dataset=dataset(seed=99, batches=3, sentences=3),
    )


def _count_validation_batches(trainer, sigterm_at_batch=None):
    """Counts the validation batches `trainer` scores; SIGTERM to this process as the
    `sigterm_at_batch`-th (1-based) starts."""
    scored = []
    loss_sums = trainer.validator._loss_sums

    def counted(*batch):
        scored.append(1)
        if len(scored) == sigterm_at_batch:
            os.kill(os.getpid(), signal.SIGTERM)
        return loss_sums(*batch)

    trainer.validator._loss_sums = counted
    return scored


@pytest.mark.slow  # three trainers
def test_sigterm_during_validation_abandons_it_and_the_restart_validates_again(tmp_path):
    trainer = make_trainer(tmp_path, **CONFIG)
    scored = _count_validation_batches(trainer, sigterm_at_batch=1)
    result = _train(trainer)
    # The first batch (in flight when SIGTERM came) finishes; the other two never start.
    assert result["stop_reason"] == PREEMPTED and len(scored) == 1
    # Saved with the epoch's steps done and its end still to come.
    resumed = make_trainer(tmp_path, **CONFIG)
    resumed.restore_or_initialize()
    state = resumed.state
    assert (int(state.step.numpy()), int(state.epoch.numpy())) == (2, 0)
    assert int(state.epoch_batches.numpy()) == 2
    assert float(state.best_valid_loss.numpy()) == float("inf")
    # The restart validates epoch 1's end (no step before it), then trains epoch 2.
    resumed = make_trainer(tmp_path, **CONFIG)
    scored = _count_validation_batches(resumed)
    steps_before_validation = []
    validate = resumed.validate

    def recorded_validate(valid_dataset):
        steps_before_validation.append(int(resumed.state.step.numpy()))
        return validate(valid_dataset)

    resumed.validate = recorded_validate
    result = _train(resumed)
    assert result["stop_reason"] == "reached max_epochs" and result["step"] == 4
    assert steps_before_validation == [2, 4] and len(scored) == 6


@pytest.mark.slow  # two trainers
def test_sigterm_during_the_validation_of_a_max_steps_stop_is_validated_by_the_restart(
    tmp_path, capsys
):
    config = dict(CONFIG, max_steps=1)
    trainer = make_trainer(tmp_path, **config)
    _count_validation_batches(trainer, sigterm_at_batch=2)
    assert _train(trainer)["stop_reason"] == PREEMPTED
    # Started again, the run that reached max_steps still owes that stop's epoch end.
    resumed = make_trainer(tmp_path, **config)
    scored = _count_validation_batches(resumed)
    result = _train(resumed)
    assert result["stop_reason"] == "reached max_steps" and "valid_loss" in result
    assert result["step"] == 1 and len(scored) == 3
    assert float(resumed.state.best_valid_loss.numpy()) == pytest.approx(result["valid_loss"])
    again = _train(make_trainer(tmp_path, **config))
    assert again["already_finished"] and "Nothing to train" in capsys.readouterr().out
