"""Training: the loop and its steps, validation, annealing, checkpoints and logging.

`Trainer` is imported on first use: the loop brings TensorBoard and sacrebleu
(validation's summaries; matplotlib only once a run draws attention), which every
pipeline's flags (they name `STRATEGIES` and `TrainingConfig`) would otherwise import,
translate's start-up among them.
"""

import importlib
from typing import Any

from convs2s_tf.training.config import TrainingConfig
from convs2s_tf.training.divergence import TrainingDivergedError
from convs2s_tf.training.strategies import STRATEGIES, create_strategy
from convs2s_tf.training.training_state import TrainingState

# Exported name -> the module defining it, imported when the name is first used.
_LAZY_EXPORTS = {"Trainer": "convs2s_tf.training.trainer"}

__all__ = [
    "STRATEGIES",
    "Trainer",
    "TrainingConfig",
    "TrainingDivergedError",
    "TrainingState",
    "create_strategy",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY_EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY_EXPORTS[name]), name)
    globals()[name] = value
    return value
