"""Learned position embeddings that ignore padding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers.padded_normal import PaddedNormal
from convs2s_tf.vocabulary import PAD_ID


@keras.saving.register_keras_serializable(package="convs2s_tf")
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Looks up a learned embedding for the position of every token.

    Positions follow the authors' implementation: a non-pad token gets
    `pad_id + 1 + (number of non-pad tokens before it)` and a pad token gets `pad_id`
    (whose row is zero). Positions therefore do not depend on left padding, and the
    longest usable sequence has `max_positions - pad_id - 1` tokens. In incremental
    decoding the token generated at step `t` (0-based) is at `pad_id + 1 + t`.

    Args:
        max_positions: Rows of the table (1024 by default in ConvS2S).
        output_dim: Embedding width.
        pad_id: Id of the padding token.
        stddev: Standard deviation of the table's normal initialisation.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> layer = LearnedPositionalEmbedding(max_positions=16, output_dim=4)
    >>> layer.positions(tf.constant([[1, 1, 7, 8, 2]])).numpy().tolist()
    [[1, 1, 2, 3, 4]]
    >>> layer(tf.constant([[1, 1, 7, 8, 2]])).shape
    TensorShape([1, 5, 4])
    """

    def __init__(
        self,
        max_positions: int,
        output_dim: int,
        pad_id: int = PAD_ID,
        stddev: float = 0.1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if max_positions <= pad_id + 1:
            raise ValueError(
                f"max_positions={max_positions} leaves no usable position after pad_id={pad_id}."
            )
        self.max_positions = int(max_positions)
        self.output_dim = int(output_dim)
        self.pad_id = int(pad_id)
        self.stddev = stddev

    @property
    def max_length(self) -> int:
        """The longest sequence (its `</s>` included) the table can embed."""
        return self.max_positions - self.pad_id - 1

    def build(self, input_shape: Sequence[int | None] | None = None) -> None:
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_positions, self.output_dim),
            initializer=PaddedNormal(stddev=self.stddev, pad_id=self.pad_id),
        )

    def positions(self, tokens: tf.Tensor) -> tf.Tensor:
        """Position ids for `tokens` (`[batch, time]`), pad-aware."""
        mask = tf.cast(tf.not_equal(tokens, self.pad_id), tf.int32)
        return tf.cumsum(mask, axis=1) * mask + self.pad_id

    def call(self, tokens: tf.Tensor) -> tf.Tensor:
        embeddings = tf.cast(self.embeddings, self.compute_dtype)
        return tf.gather(embeddings, self.positions(tokens))

    def step_embedding(self, step: int | tf.Tensor) -> tf.Tensor:
        """The embedding `[output_dim]` of the token generated at 0-based `step`."""
        if not self.built:
            self.build()
        embeddings = tf.cast(self.embeddings, self.compute_dtype)
        return tf.gather(embeddings, self.pad_id + 1 + tf.cast(step, tf.int32))

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        return tuple(input_shape) + (self.output_dim,)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "max_positions": self.max_positions,
                "output_dim": self.output_dim,
                "pad_id": self.pad_id,
                "stddev": self.stddev,
            }
        )
        return config
