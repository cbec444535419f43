"""The optimiser a `TrainingConfig` names: the paper's NAG, or Adam."""

from __future__ import annotations

from typing import TYPE_CHECKING

import keras

from convs2s_tf.training.fused_adam import FusedAdam
from convs2s_tf.training.fused_sgd import FusedSGD

if TYPE_CHECKING:
    from convs2s_tf.training.config import TrainingConfig


def make_optimizer(config: TrainingConfig) -> keras.optimizers.Optimizer:
    """Returns `config`'s optimiser at its initial (peak) learning rate (unbuilt).

    "nag" is `FusedSGD` with Nesterov momentum, as the authors train ConvS2S; "adam" is
    `FusedAdam` (Keras' Adam, one kernel per variable), with decoupled weight decay
    (AdamW) when `weight_decay` > 0, as attention and normalisation models are trained
    (the Transformer, SliceNet). The warm-up, if any, sets the rate of every update
    (`TrainingSteps`).
    """
    weight_decay = config.weight_decay or None
    if config.optimizer == "adam":
        return FusedAdam(
            learning_rate=config.learning_rate,
            beta_1=config.adam_beta1,
            beta_2=config.adam_beta2,
            epsilon=config.adam_epsilon,
            weight_decay=weight_decay,
        )
    return FusedSGD(
        learning_rate=config.learning_rate,
        momentum=config.momentum,
        nesterov=True,
        weight_decay=weight_decay,
    )
