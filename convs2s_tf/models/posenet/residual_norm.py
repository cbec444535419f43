"""A residual connection around a sub-layer, with its layer normalisation after or before."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers.random_bits_dropout import RandomBitsDropout
from convs2s_tf.models.posenet.layer_norm import LayerNorm
from convs2s_tf.models.posenet.step_weights import NormWeights, norm_rows, read_norm

PLACEMENTS = ("post", "pre")


@keras.saving.register_keras_serializable(package="convs2s_tf")
class ResidualNorm(keras.layers.Layer):
    """Joins a sub-layer `f` to its input `x` with a residual link and a layer norm.

    `"post"`: `LayerNorm(x + dropout(f(x)))`, the paper's `norm(x + f(x))` and the
    Transformer's (tensor2tensor's `layer_postprocess` "dan": dropout, add, norm).
    `"pre"`: `x + dropout(f(LayerNorm(x)))`: the norm moves into the branch and the
    residual stream stays unnormalised, which deep stacks train with far fewer updates
    (the stack then needs a norm of its own at its end). The caller feeds the sub-layer
    `branch_input(x)` and joins its output with `join(x, f(...))`; both act per position,
    so a decoding step makes the same calls on its `[rows, d]` (`branch_rows`,
    `join_rows`, with the norm's weights read once: `read_step_weights`).

    Args:
        dropout: Drop probability of the sub-layer's output.
        placement: `"post"` or `"pre"`.
        epsilon: The layer normalisation's epsilon.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> join = ResidualNorm(dropout=0.1, placement="pre")
    >>> x = tf.ones([2, 3, 4])
    >>> join(x, 2.0 * join.branch_input(x)).shape
    TensorShape([2, 3, 4])
    """

    def __init__(
        self, dropout: float = 0.0, placement: str = "post", epsilon: float = 1e-6, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}.")
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}.")
        self.dropout = float(dropout)
        self.placement = placement
        self.epsilon = float(epsilon)
        self.dropout_layer = RandomBitsDropout(self.dropout)
        self.norm = LayerNorm(epsilon=self.epsilon, name="norm")

    def build(self, inputs_shape: Sequence[int | None], update_shape: Any = None) -> None:
        if not self.norm.built:  # `branch_input` may have built it
            self.norm.build(tuple(inputs_shape))

    def branch_input(self, inputs: tf.Tensor, training: bool = False) -> tf.Tensor:
        """What the sub-layer reads: `inputs` itself (post), or their norm (pre; in
        training, `training` takes the norm's training path)."""
        return self.norm(inputs, training=training) if self.placement == "pre" else inputs

    def call(self, inputs: tf.Tensor, update: tf.Tensor, training: bool = False) -> tf.Tensor:
        joined = inputs + self.dropout_layer(update, training=training)
        return self.norm(joined, training=training) if self.placement == "post" else joined

    def read_step_weights(self) -> NormWeights:
        """The norm's weights for `branch_rows` and `join_rows`."""
        return read_norm(self.norm)

    def branch_rows(self, rows: tf.Tensor, weights: NormWeights | None = None) -> tf.Tensor:
        """`branch_input` of `[rows, d]` at inference (`weights`: `read_step_weights()`,
        or None: read now)."""
        if self.placement != "pre":
            return rows
        return norm_rows(rows, weights or self.read_step_weights())

    def join_rows(
        self, rows: tf.Tensor, update: tf.Tensor, weights: NormWeights | None = None
    ) -> tf.Tensor:
        """The join of `[rows, d]` and their update at inference (no dropout;
        `weights` as `branch_rows`')."""
        joined = rows + update
        if self.placement != "post":
            return joined
        return norm_rows(joined, weights or self.read_step_weights())

    def compute_output_shape(
        self, inputs_shape: Sequence[int | None], update_shape: Any = None
    ) -> tuple[int | None, ...]:
        return tuple(inputs_shape)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {"dropout": self.dropout, "placement": self.placement, "epsilon": self.epsilon}
        )
        return config
