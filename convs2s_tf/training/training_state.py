"""Training progress kept in checkpoints next to the model and optimiser."""

from __future__ import annotations

import tensorflow as tf


class TrainingState(tf.Module):
    """Counters, learning-rate state and the time budget's account, restored on resume.

    Attributes:
        step: Updates attempted so far (skipped non-finite ones included).
        epoch: Epochs completed.
        epoch_batches: Batches of the current epoch already consumed (resume point).
        learning_rate: Current learning rate (the optimiser's is set from it).
        best_valid_loss: Best validation loss so far (inf before the first).
        best_valid_nll: Validation NLL per token at the best loss, for the plateau rule.
        train_seconds: Wall time the run has trained so far, over every process that
            trained it, as of this checkpoint (what a time budget counts).
        epoch_started_seconds: `train_seconds` when the open epoch began (at the last
            complete epoch end).
        epoch_seconds: How long the last complete epoch took, its epoch end included
            (a time budget's forecast of the next one).
        cooled_down: Whether the cooldown before the time limit has shrunk the rate
            (it does so once per run).
        epoch_end_step: The step of the last epoch end (validated and saved); -1 before
            the first. A run that stopped while a SIGTERM abandoned its last epoch end
            finishes that epoch end when started again.
    """

    def __init__(self, learning_rate: float) -> None:
        super().__init__(name="training_state")
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
        self.epoch_batches = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch_batches")
        self.learning_rate = tf.Variable(
            float(learning_rate), dtype=tf.float32, trainable=False, name="learning_rate"
        )
        self.best_valid_loss = tf.Variable(
            float("inf"), dtype=tf.float32, trainable=False, name="best_valid_loss"
        )
        self.best_valid_nll = tf.Variable(
            float("inf"), dtype=tf.float32, trainable=False, name="best_valid_nll"
        )
        self.train_seconds = _seconds("train_seconds")
        self.epoch_started_seconds = _seconds("epoch_started_seconds")
        self.epoch_seconds = _seconds("epoch_seconds")
        self.cooled_down = tf.Variable(False, trainable=False, name="cooled_down")
        self.epoch_end_step = tf.Variable(
            -1, dtype=tf.int64, trainable=False, name="epoch_end_step"
        )


def _seconds(name: str) -> tf.Variable:
    return tf.Variable(0.0, dtype=tf.float64, trainable=False, name=name)
