"""Sinusoidal position signals that ignore padding."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.vocabulary import PAD_ID


@keras.saving.register_keras_serializable(package="convs2s_tf")
class SinusoidalTiming(keras.layers.Layer):
    """The fixed position signal of PoseNet and SliceNet: `[sin(p / tau_i) || cos(p / tau_i)]`.

    The timescales `tau_i` grow geometrically from `min_timescale` to `max_timescale`
    over `channels // 2` steps, sines in the first half of the channels and cosines in
    the second (tensor2tensor's `add_timing_signal_1d`; PoseNet's
    `sin(pos / 10000^(2i/d))` up to the spacing of the timescales). An odd last channel is
    zero. Positions are pad-aware, as in `LearnedPositionalEmbedding`: a token's
    position counts the non-pad tokens before it (0-based), and a pad token gets a zero
    signal, so left padding does not move a sentence. The layer has no weights.

    Args:
        channels: Width of the signal.
        min_timescale: The shortest timescale.
        max_timescale: The longest timescale.
        pad_id: Id of the padding token.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> timing = SinusoidalTiming(channels=4)
    >>> timing.positions(tf.constant([[1, 7, 8, 2]])).numpy().tolist()
    [[-1, 0, 1, 2]]
    >>> timing(tf.constant([[1, 7, 8, 2]])).shape
    TensorShape([1, 4, 4])
    """

    def __init__(
        self,
        channels: int,
        min_timescale: float = 1.0,
        max_timescale: float = 1.0e4,
        pad_id: int = PAD_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if channels < 2:
            raise ValueError(f"SinusoidalTiming needs at least 2 channels, got {channels}.")
        if not 0 < min_timescale <= max_timescale:
            raise ValueError(
                f"Timescales must satisfy 0 < min_timescale <= max_timescale, got "
                f"{min_timescale} and {max_timescale}."
            )
        self.channels = int(channels)
        self.min_timescale = float(min_timescale)
        self.max_timescale = float(max_timescale)
        self.pad_id = int(pad_id)
        self.built = True

    def positions(self, tokens: tf.Tensor) -> tf.Tensor:
        """Returns the 0-based position of every token of `[batch, time]`, -1 at pads."""
        mask = tf.cast(tf.not_equal(tokens, self.pad_id), tf.int32)
        return tf.cumsum(mask, axis=1) * mask - 1

    def signal(self, positions: tf.Tensor) -> tf.Tensor:
        """Returns the signal `[..., channels]` of int `positions` (zero where negative)."""
        half = self.channels // 2
        increment = math.log(self.max_timescale / self.min_timescale) / max(half - 1, 1)
        inverse_timescales = self.min_timescale * tf.exp(
            tf.range(half, dtype=tf.float32) * -increment
        )
        scaled = tf.cast(positions, tf.float32)[..., None] * inverse_timescales
        signal = tf.concat([tf.sin(scaled), tf.cos(scaled)], axis=-1)
        if self.channels % 2:
            signal = tf.pad(signal, [[0, 0]] * (len(signal.shape) - 1) + [[0, 1]])
        signal *= tf.cast(positions >= 0, tf.float32)[..., None]
        return tf.cast(signal, self.compute_dtype)

    def call(self, tokens: tf.Tensor) -> tf.Tensor:
        return self.signal(self.positions(tokens))

    def step_signal(self, step: int | tf.Tensor) -> tf.Tensor:
        """Returns the signal `[channels]` of the token generated at 0-based `step`."""
        return self.signal(tf.cast(step, tf.int32))

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        return tuple(input_shape) + (self.channels,)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "channels": self.channels,
                "min_timescale": self.min_timescale,
                "max_timescale": self.max_timescale,
                "pad_id": self.pad_id,
            }
        )
        return config
