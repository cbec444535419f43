"""Nesterov SGD with the update in one fused kernel per variable."""

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf


def resource_handle(variable: Any) -> tf.Tensor:
    """The resource handle of a Keras or TensorFlow variable, for TensorFlow's fused
    `ResourceApply*` update kernels."""
    # Keras 3 variables wrap a tf.Variable (`.value`); under a distribution strategy's
    # update the per-device component arrives, which may be either kind.
    if hasattr(variable, "handle"):
        return variable.handle
    return variable.value.handle


@keras.saving.register_keras_serializable(package="convs2s_tf")
class FusedSGD(keras.optimizers.SGD):
    """Nesterov SGD as the authors' optimiser (fairseq's NAG), one kernel per variable.

    Keras' SGD spells the (Nesterov) momentum update as five elementwise operations and
    two assignments per variable, each a full pass over the variable, a visible part
    of a CPU training step for ConvS2S's millions of parameters. This subclass issues
    TensorFlow's `ResourceApplyKerasMomentum` instead, the same arithmetic in one pass:
    `m = momentum * m - lr * g`, then `w += momentum * m - lr * g` (Nesterov) or
    `w += m`. Sparse gradients take Keras' own update.

    The velocity `m` holds the learning rate it was accumulated with. As in fairseq's
    NAG, whenever the rate differs from the one of the previous update (a plateau
    shrink, a resumed run with another rate, any schedule) the velocity is first
    rescaled by `lr / previous_lr`, so the step after a change moves the weights by the
    new rate's amount rather than coasting on the old rate's velocity. The rate of the
    last update is kept in the optimiser's variables (and so in checkpoints).

    Args:
        **kwargs: Arguments of `keras.optimizers.SGD`.

    Example:

    >>> optimizer = FusedSGD(learning_rate=0.25, momentum=0.99, nesterov=True)
    >>> variable = keras.Variable([1.0, 2.0])
    >>> optimizer.apply([tf.constant([1.0, 1.0])], [variable])
    >>> variable.numpy().tolist()
    [0.5024999976158142, 1.502500057220459]
    """

    def build(self, variables: Sequence[Any]) -> None:
        if self.built:
            return
        super().build(variables)
        # fairseq's `lr_old`; 0 until the first update (the velocity is zero then).
        self.previous_learning_rate = self.add_variable(
            shape=(), dtype="float32", initializer="zeros", name="previous_learning_rate"
        )

    def _backend_update_step(
        self, gradients: Sequence[Any], trainable_variables: Sequence[Any], learning_rate: Any
    ) -> None:
        if self.momentum:
            self._rescale_velocity(learning_rate)
        super()._backend_update_step(gradients, trainable_variables, learning_rate)
        self.previous_learning_rate.assign(tf.cast(learning_rate, tf.float32))

    def _rescale_velocity(self, learning_rate: Any) -> None:
        rate = tf.cast(learning_rate, tf.float32)
        previous = tf.convert_to_tensor(self.previous_learning_rate)
        changed = tf.logical_and(previous > 0, tf.not_equal(rate, previous))
        ratio = tf.where(previous > 0, rate / tf.maximum(previous, 1e-30), 1.0)

        def rescale() -> tf.Tensor:
            # A pass over every slot, taken only on the update after a rate change.
            for velocity in self.momentums:
                velocity.assign(velocity * tf.cast(ratio, velocity.dtype))
            return tf.constant(True)

        tf.cond(changed, rescale, lambda: tf.constant(False))

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        if self.momentum == 0 or isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        momentum_slot = self.momentums[self._get_variable_index(variable)]
        dtype = variable.dtype
        tf.raw_ops.ResourceApplyKerasMomentum(
            var=resource_handle(variable),
            accum=resource_handle(momentum_slot),
            lr=tf.cast(learning_rate, dtype),
            grad=tf.cast(gradient, dtype),
            momentum=tf.cast(self.momentum, dtype),
            use_locking=False,
            use_nesterov=self.nesterov,
        )
