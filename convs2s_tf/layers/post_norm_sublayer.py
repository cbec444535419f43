"""The Transformer's post-norm residual connection around a sub-layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers.random_bits_dropout import RandomBitsDropout


@keras.saving.register_keras_serializable(package="convs2s_tf")
class PostNormSublayer(keras.layers.Layer):
    """`LayerNorm(x + dropout(f(x)))`: how PoseNet joins a sub-layer to its input.

    The paper writes each sub-layer as `norm(x + f(x))`; the dropout on `f(x)` is the
    Transformer's (tensor2tensor's `layer_postprocess` "dan": dropout, add, norm). The
    layer takes `x` and the sub-layer's output, so any sub-layer (attention,
    feed-forward net) keeps its own signature; it acts per position, so a decoding step
    is the same call on one position.

    Args:
        dropout: Drop probability of the sub-layer's output.
        epsilon: The layer normalisation's epsilon.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> joined = PostNormSublayer(dropout=0.1)(tf.ones([2, 3, 4]), tf.zeros([2, 3, 4]))
    >>> joined.shape
    TensorShape([2, 3, 4])
    """

    def __init__(self, dropout: float = 0.0, epsilon: float = 1e-6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}.")
        self.dropout = float(dropout)
        self.epsilon = float(epsilon)
        self.dropout_layer = RandomBitsDropout(self.dropout)
        self.norm = keras.layers.LayerNormalization(epsilon=self.epsilon, name="norm")

    def build(self, inputs_shape: Sequence[int | None], update_shape: Any = None) -> None:
        self.norm.build(tuple(inputs_shape))

    def call(self, inputs: tf.Tensor, update: tf.Tensor, training: bool = False) -> tf.Tensor:
        return self.norm(inputs + self.dropout_layer(update, training=training))

    def compute_output_shape(
        self, inputs_shape: Sequence[int | None], update_shape: Any = None
    ) -> tuple[int | None, ...]:
        return tuple(inputs_shape)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"dropout": self.dropout, "epsilon": self.epsilon})
        return config
