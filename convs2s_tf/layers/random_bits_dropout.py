"""Dropout drawing 16 random bits per element."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

# Random draws are 16-bit integers: a rate is matched to within 2**-17.
_LEVELS = 1 << 16


@keras.saving.register_keras_serializable(package="convs2s_tf")
class RandomBitsDropout(keras.layers.Layer):
    """Inverted dropout, as `keras.layers.Dropout`, at half its random-number cost.

    `keras.layers.Dropout` draws one float32 uniform per element (32 random bits and a
    conversion), and on a CPU its random-number generation is a visible part of a
    ConvS2S training step. This layer draws one 32-bit word per two elements, reads it
    as two 16-bit integers and keeps an element when its integer is at or above the
    rate's threshold, so the dropout rate is `rate` rounded to a multiple of `2**-16`. Kept
    elements are scaled by `1 / (1 - rounded rate)`, so expectations are preserved
    exactly. Seeds come from a `keras.random.SeedGenerator`, as in Keras' layer, and
    are checkpointed with it.

    Args:
        rate: Fraction of the elements to drop, in `[0, 1)`.
        seed: Optional integer seed of the layer's seed generator.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> layer = RandomBitsDropout(0.5, seed=1)
    >>> outputs = layer(tf.ones([4, 1000]), training=True)
    >>> sorted(set(outputs.numpy().ravel().tolist()))
    [0.0, 2.0]
    """

    def __init__(self, rate: float, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"RandomBitsDropout needs a rate in [0, 1), got {rate}.")
        self.rate = float(rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        # Drop an element when its draw (uniform over the int16 range) is below this.
        self._threshold = round(self.rate * _LEVELS) - _LEVELS // 2
        self._scale = 1.0 / (1.0 - round(self.rate * _LEVELS) / _LEVELS)
        self.built = True

    def call(self, inputs: tf.Tensor, training: bool = False) -> tf.Tensor:
        if not training or self._threshold == -(_LEVELS // 2):
            return inputs
        # Seed state variables are int64; stateless ops want int32 (as Keras does it).
        seed = tf.cast(tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1), tf.int32)
        size = tf.size(inputs)
        words = tf.random.stateless_uniform(
            [(size + 1) // 2], seed=seed, minval=None, maxval=None, dtype=tf.int32
        )
        draws = tf.reshape(tf.bitcast(words, tf.int16), [-1])[:size]
        keep = tf.reshape(draws >= self._threshold, tf.shape(inputs))
        mask = tf.where(
            keep, tf.constant(self._scale, inputs.dtype), tf.constant(0.0, inputs.dtype)
        )
        # The mask is a constant of the step: its gradient is never needed.
        return inputs * tf.stop_gradient(mask)

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> Sequence[int | None]:
        return input_shape

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config
