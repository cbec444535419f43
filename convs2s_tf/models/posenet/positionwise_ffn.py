"""The position-wise feed-forward net that ends every PoseNet layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers.checkpoint_tracking import track_for_checkpoint
from convs2s_tf.layers.random_bits_dropout import RandomBitsDropout
from convs2s_tf.models.posenet.step_weights import DenseWeights, dense_rows, read_dense


@keras.saving.register_keras_serializable(package="convs2s_tf")
class PositionwiseFFN(keras.layers.Layer):
    """`ffn^n`: `num_layers` linear maps applied at every position, ReLU between them.

    PoseNet ends each layer with "a position-wise feed-forward net of n linear maps"; the
    Transformer's is n = 2 with a 4x wider hidden layer (tensor2tensor's
    `dense_relu_dense`, whose dropout acts on the hidden activations). Positions do not
    interact, so a decoding step is the same maps on its `[rows, d]` (`step`, with the
    weights read once: `read_step_weights`).

    Args:
        hidden_dim: Width of the inner layers.
        output_dim: Width of the output (None: the input's).
        num_layers: Linear maps, >= 1 (1: a single map, no ReLU).
        dropout: Drop probability of the hidden activations.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> ffn = PositionwiseFFN(hidden_dim=16)
    >>> ffn(tf.ones([2, 3, 4])).shape
    TensorShape([2, 3, 4])
    """

    def __init__(
        self,
        hidden_dim: int,
        output_dim: int | None = None,
        num_layers: int = 2,
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if int(num_layers) < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}.")
        self.hidden_dim = int(hidden_dim)
        self.output_dim = None if output_dim is None else int(output_dim)
        self.num_layers = int(num_layers)
        self.dropout = float(dropout)
        self.dropout_layer = RandomBitsDropout(self.dropout)
        self.maps: list[keras.layers.Dense] = []

    def build(self, input_shape: Sequence[int | None]) -> None:
        channels = input_shape[-1]
        if channels is None:
            raise ValueError("PositionwiseFFN needs inputs with a known channel dimension.")
        output_dim = self.output_dim or channels
        widths = [self.hidden_dim] * (self.num_layers - 1) + [output_dim]
        self.maps = [keras.layers.Dense(width, name=f"map_{i}") for i, width in enumerate(widths)]
        shape = tuple(input_shape)
        for dense, width in zip(self.maps, widths):
            dense.build(shape)
            shape = shape[:-1] + (width,)
        track_for_checkpoint(
            self, [(f"map_{index}", dense) for index, dense in enumerate(self.maps)]
        )

    def call(self, inputs: tf.Tensor, training: bool = False) -> tf.Tensor:
        x = inputs
        for dense in self.maps[:-1]:
            x = self.dropout_layer(tf.nn.relu(dense(x)), training=training)
        return self.maps[-1](x)

    def read_step_weights(self) -> tuple[DenseWeights, ...]:
        """The maps' weights for `step`."""
        return tuple(read_dense(dense) for dense in self.maps)

    def step(self, rows: tf.Tensor, weights: tuple[DenseWeights, ...] | None = None) -> tf.Tensor:
        """The net on `[rows, d]` at inference (`weights`: `read_step_weights()`, or
        None: read now)."""
        maps = weights or self.read_step_weights()
        for dense in maps[:-1]:
            rows = tf.nn.relu(dense_rows(rows, dense))
        return dense_rows(rows, maps[-1])

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.output_dim or input_shape[-1],)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "output_dim": self.output_dim,
                "num_layers": self.num_layers,
                "dropout": self.dropout,
            }
        )
        return config
