"""What a run trains with: the model, its optimiser and the state a checkpoint keeps.

They are built together, in the strategy's scope and in the run's precision and seed,
because each needs the ones before it: the optimiser's slots need the built model's
variables, and the step functions need all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import keras
import tensorflow as tf
from absl import logging

from convs2s_tf.training.cpu_features import bfloat16_warning
from convs2s_tf.training.loss_scaling import DynamicLossScale
from convs2s_tf.training.optimizers import make_optimizer
from convs2s_tf.training.plateau import PlateauSchedule
from convs2s_tf.training.steps import TrainingSteps
from convs2s_tf.training.training_state import TrainingState

if TYPE_CHECKING:
    from convs2s_tf.models import ConvS2S
    from convs2s_tf.training.config import TrainingConfig

# The Keras precision policy of each `TrainingConfig.dtype`.
_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


@dataclasses.dataclass(frozen=True)
class TrainingObjects:
    """The objects a run trains with, all created in its strategy's scope.

    Attributes:
        model: The built model.
        optimizer: The optimiser, its slots built.
        loss_scale: float16's `DynamicLossScale`, else None.
        state: The run's `TrainingState` (its counters, rate and time account).
        schedule: The paper's annealing (`PlateauSchedule`).
        steps: The step functions (`TrainingSteps`), traced later by `build`.
    """

    model: ConvS2S
    optimizer: keras.optimizers.Optimizer
    loss_scale: DynamicLossScale | None
    state: TrainingState
    schedule: PlateauSchedule
    steps: TrainingSteps


def build_training_objects(
    model_fn: Callable[[], ConvS2S],
    config: TrainingConfig,
    strategy: tf.distribute.Strategy,
    stop_vote: tf.Variable,
) -> TrainingObjects:
    """Builds the model, the optimiser (with its slots), the training state and the step
    functions under `strategy`'s scope, in the run's dtype and seed.

    Args:
        model_fn: Builds the (unbuilt) model.
        config: The run's `TrainingConfig`.
        strategy: The run's strategy.
        stop_vote: The SIGTERM vote every step adds to its sums (`PreemptionWatch.vote`).
    """
    if config.dtype == "bfloat16" and not tf.config.list_logical_devices("GPU"):
        warning = bfloat16_warning()
        if warning:
            logging.warning(warning)
    keras.mixed_precision.set_global_policy(_POLICIES[config.dtype])
    keras.utils.set_random_seed(config.seed)
    with strategy.scope():
        model = model_fn()
        model(model.dummy_inputs())
        optimizer = make_optimizer(config)
        # Keras 3 creates slots lazily; they must exist before the first traced step.
        loss_scale = DynamicLossScale(optimizer) if config.dtype == "float16" else None
        if loss_scale is not None:
            loss_scale.build(model.trainable_variables)
        else:
            optimizer.build(model.trainable_variables)
        state = TrainingState(config.learning_rate)
        schedule = PlateauSchedule(config.lr_shrink, config.lr_threshold, config.lr_patience)
        steps = TrainingSteps(model, optimizer, state, config, strategy, loss_scale, stop_vote)
    return TrainingObjects(model, optimizer, loss_scale, state, schedule, steps)
