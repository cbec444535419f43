"""Training: the loop and its steps, validation, annealing, checkpoints and logging."""

from convs2s_tf.training.config import TrainingConfig
from convs2s_tf.training.divergence import TrainingDivergedError
from convs2s_tf.training.strategies import STRATEGIES, create_strategy
from convs2s_tf.training.trainer import Trainer
from convs2s_tf.training.training_state import TrainingState

__all__ = [
    "STRATEGIES",
    "Trainer",
    "TrainingConfig",
    "TrainingDivergedError",
    "TrainingState",
    "create_strategy",
]
