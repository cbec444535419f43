"""Gradient scaling: identity forward, scaled gradient backward."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras
import tensorflow as tf


def scale_gradient(inputs: tf.Tensor, scale: float | tf.Tensor) -> tf.Tensor:
    """Returns `inputs` unchanged, with the gradient flowing back multiplied by `scale`.

    The ConvS2S encoder output uses it with `1 / (2 * attention_layers)` so that the
    gradient from all decoder attention modules does not swamp the encoder (paper 3.4;
    fairseq's `GradMultiply`).
    """

    @tf.custom_gradient
    def _scale(x: tf.Tensor) -> tuple[tf.Tensor, Callable[[tf.Tensor], tf.Tensor]]:
        def grad(upstream: tf.Tensor) -> tf.Tensor:
            return upstream * tf.cast(scale, upstream.dtype)

        return tf.identity(x), grad

    return _scale(inputs)


@keras.saving.register_keras_serializable(package="convs2s_tf")
class GradientScale(keras.layers.Layer):
    """Identity in the forward pass; multiplies the incoming gradient by `scale`.

    Args:
        scale: The factor applied to the gradient.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> x = tf.constant([1.0, 2.0])
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = tf.reduce_sum(GradientScale(0.25)(x))
    >>> tape.gradient(y, x).numpy().tolist()
    [0.25, 0.25]
    """

    def __init__(self, scale: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scale = float(scale)

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        return scale_gradient(inputs, self.scale)

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> Sequence[int | None]:
        return input_shape

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"scale": self.scale})
        return config
