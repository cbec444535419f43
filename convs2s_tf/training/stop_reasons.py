"""Why a run stops: the limits it reaches, and SIGTERM.

Every worker judges the limits on the same values (the step, the epoch and the rate are
the same on all; the time limit's verdict is the chief's, broadcast), so all stop at the
same step with the same reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from convs2s_tf.training.training_state import TrainingState

if TYPE_CHECKING:
    from convs2s_tf.training.config import TrainingConfig

# Why training stopped when a SIGTERM asked it to (the pipelines exit with
# `coordination.PREEMPTED_EXIT_STATUS` then).
PREEMPTED = "preempted (SIGTERM): saved, re-run the command to resume"


def max_steps_reached(config: TrainingConfig, step: int) -> str | None:
    """ "reached max_steps" once `step` is `config.max_steps` (0: no limit), else None:
    checked after every update, so a run stops inside an epoch."""
    if config.max_steps and step >= config.max_steps:
        return "reached max_steps"
    return None


def limit_reached(config: TrainingConfig, state: TrainingState, time_expired: bool) -> str | None:
    """The first limit the run has reached, checked before training and at epoch ends.

    Args:
        config: The run's `TrainingConfig` (`max_steps`, `max_epochs`,
            `min_learning_rate`).
        state: The run's `TrainingState`.
        time_expired: The chief's time limit verdict (`TimeBudget.expired`).

    Returns:
        Why the run stops ("reached max_epochs", ...), or None to train on.
    """
    reason = max_steps_reached(config, int(state.step.numpy()))
    if reason is not None:
        return reason
    if config.max_epochs and int(state.epoch.numpy()) >= config.max_epochs:
        return "reached max_epochs"
    if float(state.learning_rate.numpy()) <= config.min_learning_rate:
        return f"learning rate reached the floor {config.min_learning_rate:g}"
    if time_expired:
        return "reached the time limit"
    return None


def epoch_end_pending(state: TrainingState) -> bool:
    """Whether the run stopped inside an epoch but a SIGTERM abandoned the epoch end that
    stop makes (its validation and checkpoint): a re-run does that epoch end."""
    return int(state.epoch_batches.numpy()) > 0 and int(state.epoch_end_step.numpy()) != int(
        state.step.numpy()
    )
