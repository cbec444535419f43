"""Dynamic loss scaling for float16 training, with Keras' `LossScaleOptimizer`'s state.

float16 (GPUs without bfloat16: V100, T4) keeps 5 exponent bits, so small gradients
underflow to zero. The loss is multiplied by a scale before the backward pass and the
gradients divided by it before the update; a step whose gradients overflow is skipped
and the scale halved, and the scale doubles after `growth_steps` finite steps in a row
(Keras' rule, with its defaults: 2**15 and 2,000).

The scale lives in a `keras.optimizers.LossScaleOptimizer` around the training
optimiser, but the update is the trainer's own: its step reduces gradients across
replicas, then clips and applies them in cross-replica context, where
`LossScaleOptimizer.apply` refuses to run.
"""

from __future__ import annotations

import keras
import tensorflow as tf


class DynamicLossScale:
    """The loss scale of a float16 run (create and `build` it in the strategy's scope).

    Args:
        optimizer: the training optimiser (unbuilt: `build` builds it).

    Example:
        loss_scale = DynamicLossScale(optimizer)
        loss_scale.build(model.trainable_variables)
        scaled_loss = loss_scale.scale_loss(loss)  # in the replicas' backward pass
        loss_scale.update(finite)  # once per step, after the reduced gradients
    """

    def __init__(self, optimizer: keras.optimizers.Optimizer) -> None:
        self.keras_optimizer = keras.optimizers.LossScaleOptimizer(optimizer)

    def build(self, variables: list[tf.Variable]) -> None:
        """Creates the scale and the step counter, and builds the inner optimiser."""
        self.keras_optimizer.build(variables)

    @property
    def scale(self) -> tf.Variable:
        return self.keras_optimizer.dynamic_scale

    def scale_loss(self, loss: tf.Tensor) -> tf.Tensor:
        return loss * tf.cast(self.scale, loss.dtype)

    def update(self, finite: tf.Tensor) -> None:
        """Grows the scale after enough finite steps, halves it after an overflow."""
        counter = self.keras_optimizer.step_counter
        growth_steps = self.keras_optimizer.dynamic_growth_steps

        def finite_step() -> tf.Tensor:
            grow = tf.equal(counter, growth_steps - 1)
            self.scale.assign(tf.where(grow, self.scale * 2.0, self.scale))
            counter.assign(tf.where(grow, tf.zeros_like(counter), counter + 1))
            return tf.constant(True)

        def overflow() -> tf.Tensor:
            self.scale.assign(self.scale * 0.5)
            counter.assign(tf.zeros_like(counter))
            return tf.constant(False)

        tf.cond(finite, finite_step, overflow)
