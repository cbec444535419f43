"""ConvS2S multi-step attention."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers.folded_kernels import FoldedKernels
from convs2s_tf.layers.weight_norm_dense import WeightNormDense


@keras.saving.register_keras_serializable(package="convs2s_tf")
class MultiStepAttention(keras.layers.Layer):
    """The attention of one ConvS2S decoder block (paper section 3.3).

    For a decoder state `h` (width `channels`) and the decoder's target embedding `g`
    (width `embed_dim`):

    * `d = (Linear(channels -> embed_dim)(h) + g) * sqrt(0.5)`;
    * `a = softmax(d . keys^T)` over the source, with source padding excluded;
    * `ctx = (a . values) * sqrt(s)`, `s` the number of non-pad source tokens (the
      paper's `s * sqrt(1/s)` scaling);
    * output `(Linear(embed_dim -> channels)(ctx) + h) * sqrt(0.5)`.

    Both linear maps are weight-normalised with `v ~ N(0, sqrt(1 / in))`. Keys are the
    encoder output `z`, values `(z + e) * sqrt(0.5)`.

    Args:
        channels: Width of the decoder state `h`.
        embed_dim: Width of the embeddings, keys and values.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `h`, `[batch, target, channels]`.
        target_embedding: `g`, `[batch, target, embed_dim]`.
        keys: `[batch, source, embed_dim]`.
        values: `[batch, source, embed_dim]`.
        source_mask: `[batch, source]` bool, True at real (non-pad) source tokens.
        kernels: Optional `FoldedKernels` of the linear maps (inference).

    Returns:
        `(outputs, weights)`: `[batch, target, channels]` and the attention weights
        `[batch, target, source]` (zero on padding, each row sums to one).

    Example:

    >>> attention = MultiStepAttention(channels=6, embed_dim=4)
    >>> outputs, weights = attention(
    ...     tf.ones([2, 3, 6]), tf.ones([2, 3, 4]), tf.ones([2, 5, 4]), tf.ones([2, 5, 4]),
    ...     source_mask=tf.sequence_mask([5, 2], 5))
    >>> outputs.shape, weights.shape
    (TensorShape([2, 3, 6]), TensorShape([2, 3, 5]))
    """

    def __init__(self, channels: int, embed_dim: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.channels = int(channels)
        self.embed_dim = int(embed_dim)
        self.in_projection = WeightNormDense(
            self.embed_dim, stddev=math.sqrt(1.0 / self.channels), name="in_projection"
        )
        self.out_projection = WeightNormDense(
            self.channels, stddev=math.sqrt(1.0 / self.embed_dim), name="out_projection"
        )

    def build(self, input_shape: Sequence[int | None] | None = None) -> None:
        self.in_projection.build((None, None, self.channels))
        self.out_projection.build((None, None, self.embed_dim))

    def call(
        self,
        inputs: tf.Tensor,
        target_embedding: tf.Tensor,
        keys: tf.Tensor,
        values: tf.Tensor,
        source_mask: tf.Tensor,
        kernels: FoldedKernels | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        residual = inputs
        half = tf.constant(math.sqrt(0.5), self.compute_dtype)
        query = (
            self.in_projection(inputs, kernels=kernels)
            + tf.cast(target_embedding, self.compute_dtype)
        ) * half
        scores = tf.matmul(query, tf.cast(keys, self.compute_dtype), transpose_b=True)
        # Softmax in float32 whatever the compute dtype; padding gets exactly zero weight.
        scores = tf.cast(scores, tf.float32)
        scores = tf.where(source_mask[:, None, :], scores, tf.float32.min)
        weights = tf.nn.softmax(scores, axis=-1)
        context = tf.matmul(
            tf.cast(weights, self.compute_dtype), tf.cast(values, self.compute_dtype)
        )
        source_length = tf.reduce_sum(tf.cast(source_mask, self.compute_dtype), axis=1)
        context = context * tf.sqrt(source_length)[:, None, None]
        outputs = (self.out_projection(context, kernels=kernels) + residual) * half
        return outputs, weights

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"channels": self.channels, "embed_dim": self.embed_dim})
        return config
