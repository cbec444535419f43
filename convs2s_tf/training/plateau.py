"""The paper's annealing: shrink the learning rate when validation stops improving."""

from typing import Any

import tensorflow as tf
from absl import logging


class PlateauSchedule(tf.Module):
    """fairseq's `reduce_lr_on_plateau` (PyTorch's `ReduceLROnPlateau`, mode "min").

    At each epoch end the validation loss (the label-smoothed loss, fairseq's default
    `--best-checkpoint-metric`) is compared with the best so far: it improves when it
    is below `best * (1 - threshold)`; after more than `patience` epochs in a row
    without improvement the learning rate is multiplied by `shrink`. Its state is
    checkpointed with the run.

    Args:
        shrink: Factor applied to the learning rate (fairseq's `--lr-shrink`).
        threshold: Relative improvement that counts (fairseq's `--lr-threshold`).
        patience: Epochs without improvement tolerated before a shrink
            (fairseq's `--lr-patience`).

    Example:

    >>> schedule = PlateauSchedule(shrink=0.1, threshold=1e-4, patience=0)
    >>> [round(schedule.step(loss, 0.25), 6) for loss in (3.0, 2.9, 2.8999, 2.7)]
    [0.25, 0.25, 0.025, 0.25]
    """

    def __init__(self, shrink: float = 0.1, threshold: float = 1e-4, patience: int = 0) -> None:
        super().__init__(name="plateau_schedule")
        self.shrink = float(shrink)
        self.threshold = float(threshold)
        self.patience = int(patience)
        self.best = tf.Variable(float("inf"), trainable=False, name="best")
        self.bad_epochs = tf.Variable(0, dtype=tf.int64, trainable=False, name="bad_epochs")

    def improves(self, metric: float) -> bool:
        """Whether `metric` counts as an improvement over the best so far."""
        return metric < float(self.best.numpy()) * (1.0 - self.threshold)

    def step(self, metric: float, learning_rate: float) -> float:
        """Records an epoch's validation `metric`; returns the learning rate to use next."""
        if self.improves(metric):
            self.best.assign(metric)
            self.bad_epochs.assign(0)
            return learning_rate
        self.bad_epochs.assign_add(1)
        if int(self.bad_epochs.numpy()) <= self.patience:
            return learning_rate
        self.bad_epochs.assign(0)
        return learning_rate * self.shrink


def anneal_learning_rate(
    schedule: PlateauSchedule, learning_rate: tf.Variable, optimizer: Any, valid_loss: float
) -> float:
    """Steps `schedule` with an epoch's validation loss and applies the rate it gives.

    Args:
        schedule: The run's `PlateauSchedule`.
        learning_rate: The checkpointed rate, a float32 variable
            (`TrainingState.learning_rate`).
        optimizer: The optimiser, whose `learning_rate` follows.
        valid_loss: The validation loss of the epoch just ended.

    Returns:
        The learning rate to use next.
    """
    rate = float(learning_rate.numpy())
    new_rate = schedule.step(valid_loss, rate)
    if new_rate != rate:
        set_learning_rate(learning_rate, optimizer, new_rate, "validation loss did not improve")
    return new_rate


def set_learning_rate(
    learning_rate: tf.Variable, optimizer: Any, new_rate: float, reason: str
) -> None:
    """Sets the checkpointed rate and the optimiser's to `new_rate`, logging `reason`.

    The optimiser rescales its velocity to the new rate at the next update.
    """
    logging.info("Learning rate %g -> %g: %s.", float(learning_rate.numpy()), new_rate, reason)
    learning_rate.assign(new_rate)
    optimizer.learning_rate.assign(new_rate)
