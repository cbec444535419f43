"""Training: losses, strategies, checkpoints, TensorBoard logging and the training loop."""

from convs2s_tf.training.checkpoints import CheckpointError, latest_checkpoint, restore_checkpoint
from convs2s_tf.training.config import TrainingConfig
from convs2s_tf.training.losses import token_losses
from convs2s_tf.training.strategies import STRATEGIES, create_strategy
from convs2s_tf.training.trainer import Trainer, TrainingDivergedError
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
    "token_losses",
]
