"""Training: the loop and its steps, validation, annealing, checkpoints and logging."""

from convs2s_tf.runs.checkpoints import CheckpointError, latest_checkpoint, restore_checkpoint
from convs2s_tf.training.config import TrainingConfig
from convs2s_tf.training.divergence import TrainingDivergedError
from convs2s_tf.training.strategies import STRATEGIES, create_strategy
from convs2s_tf.training.trainer import Trainer
from convs2s_tf.training.training_state import TrainingState

__all__ = [
    "STRATEGIES",
    "CheckpointError",
    "Trainer",
    "TrainingConfig",
    "TrainingDivergedError",
    "TrainingState",
    "create_strategy",
    "latest_checkpoint",
    "restore_checkpoint",
]
