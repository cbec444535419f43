"""Layer normalisation: Keras' formula at inference, a closed-form gradient in training."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf


def normalize(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float) -> tf.Tensor:
    """The layer norm of `x` over its last axis, in float32 and back to `x`'s dtype:
    Keras' `LayerNormalization` formula, operation for operation (`gamma` and `beta`
    float32)."""
    x32 = tf.cast(x, tf.float32)
    mean = tf.reduce_mean(x32, axis=-1, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(x32, mean), axis=-1, keepdims=True)
    inverse = tf.math.rsqrt(variance + epsilon) * gamma
    offset = -mean * inverse + beta
    return tf.cast(x32 * inverse + offset, x.dtype)


def normalize_for_training(
    x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float
) -> tf.Tensor:
    """The layer norm of `normalize` as `(x - mean) * r * gamma + beta` (within float32
    rounding of it), differentiated by its closed-form gradient.

    Automatic differentiation of Keras' formula takes about twenty operations over the
    activations, each a pass over memory; this takes about half as many, and keeps the
    normalised activations the gradient needs from the forward pass.
    """

    @tf.custom_gradient
    def forward(
        x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor
    ) -> tuple[tf.Tensor, Callable[[tf.Tensor], tuple[tf.Tensor, ...]]]:
        x32 = tf.cast(x, tf.float32)
        mean = tf.reduce_mean(x32, axis=-1, keepdims=True)
        centered = x32 - mean
        variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
        rsqrt = tf.math.rsqrt(variance + epsilon)
        x_hat = centered * rsqrt

        def backward(upstream: tf.Tensor) -> tuple[tf.Tensor, ...]:
            # d gamma = sum(dy * x_hat), d beta = sum(dy) over every position, and
            # dx = r * (g - mean(g) - x_hat * mean(g * x_hat)) with g = dy * gamma.
            dy = tf.cast(upstream, tf.float32)
            positions = list(range(len(dy.shape) - 1))
            d_gamma = tf.reduce_sum(dy * x_hat, positions)
            d_beta = tf.reduce_sum(dy, positions)
            g = dy * gamma
            g_mean = tf.reduce_mean(g, axis=-1, keepdims=True)
            projection = tf.reduce_mean(g * x_hat, axis=-1, keepdims=True)
            dx = rsqrt * (g - g_mean - x_hat * projection)
            return tf.cast(dx, x.dtype), d_gamma, d_beta

        return tf.cast(x_hat * gamma + beta, x.dtype), backward

    return forward(x, gamma, beta)


@keras.saving.register_keras_serializable(package="convs2s_tf")
class LayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` over the last axis, trained by a closed-form
    gradient.

    The same variables (`gamma`, `beta`) and configuration as Keras' layer, so
    checkpoints of either restore into the other. At inference it computes Keras'
    formula exactly (`normalize`, as PoseNet's decoding step does), so the same weights
    translate alike; in training, `normalize_for_training`: the same norm within float32
    rounding, differentiated in about half the operations. Only the last axis, centred
    and scaled, is supported.

    Args:
        epsilon: Added to the variance.
        **kwargs: Standard `keras.layers.LayerNormalization` arguments.

    Example:

    >>> norm = LayerNorm(epsilon=1e-6)
    >>> x = tf.constant([[1.0, 2.0, 3.0, 6.0]])
    >>> bool(tf.reduce_all(norm(x) == keras.layers.LayerNormalization(epsilon=1e-6)(x)))
    True
    """

    def __init__(self, epsilon: float = 1e-3, **kwargs: Any) -> None:
        super().__init__(epsilon=epsilon, **kwargs)
        if self.axis not in (-1, [-1]) or not (self.center and self.scale) or self.rms_scaling:
            raise ValueError(
                "LayerNorm normalises the last axis, centred and scaled; "
                f"got axis={self.axis}, center={self.center}, scale={self.scale}, "
                f"rms_scaling={self.rms_scaling}."
            )

    def call(self, inputs: tf.Tensor, training: bool = False) -> tf.Tensor:
        gamma, beta = (tf.convert_to_tensor(v) for v in (self.gamma, self.beta))
        # Inference computes Keras' formula exactly, as a decoding step does (`normalize`).
        norm = normalize_for_training if training else normalize
        return tf.cast(norm(inputs, gamma, beta, self.epsilon), self.compute_dtype)
