"""One ConvS2S block: residual, dropout, gated convolution and optional attention."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers import (
    GLU,
    MultiStepAttention,
    RandomBitsDropout,
    WeightNormConv1D,
    WeightNormDense,
)
from convs2s_tf.layers.folded_kernels import FoldedKernels
from convs2s_tf.models.convs2s.encoder_output import EncoderOutput


@keras.saving.register_keras_serializable(package="convs2s_tf")
class ConvBlock(keras.layers.Layer):
    """One block of the ConvS2S encoder or decoder (paper sections 3.2 and 3.3).

    `y = GLU(conv(dropout(x)))`, then multi-step attention when the block has it (decoder
    blocks), then `(y + r) * sqrt(0.5)`, `r` the residual input, mapped to `channels` by
    a weight-normalised linear map when its width differs. The convolution has
    `2 * channels` outputs (the GLU halves them) and `v ~ N(0, sqrt(4 (1 - p) / (k c_in)))`;
    the residual map `v ~ N(0, sqrt(1 / c_r))`.

    The caller picks the residual input (the layer spec's residual distance `n` names
    the input of the block `n - 1` blocks earlier; 0 means none) and passes it as
    `residual`; the block keeps the distance as `residual`.

    Causal blocks (`padding="causal"`) also decode incrementally: `step` takes one new
    position and the block's cached window of its `k - 1` previous inputs.

    Args:
        channels: Output width `c_out`.
        kernel_width: Convolution width `k`.
        input_channels: Width `c_in` of the block input.
        residual: Residual distance; 0 for a block without residual connection.
        residual_channels: Width `c_r` of the residual input (default `input_channels`).
        padding: `"same"` (encoder) or `"causal"` (decoder).
        dropout: Drop probability `p` before the convolution (also sets its
            initialisation).
        attention_embed_dim: Embedding width `f` of the decoder's attention, or None for
            a block without attention.
        dropout_layer: A dropout layer to share (the encoder's or decoder's, so that all
            its dropouts draw from one seed generator); by default the block makes its
            own `RandomBitsDropout(dropout)`. It is not part of the config.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `[batch, time, input_channels]`.
        residual: `[batch, time, residual_channels]`, required when `residual > 0`.
        padding_mask: Optional `[batch, time, 1]` multiplier zeroing padding before the
            dropout (the encoder's, for padding invariance).
        target_embedding: `g` `[batch, time, f]`, for attention.
        encoder_output: `EncoderOutput`, for attention.
        training: Whether dropout is active.
        return_attention: Also return the attention weights `[batch, time, source]`
            (None without attention).
        kernels: Optional `FoldedKernels` of the block's layers (inference; `step`
            takes it too).

    Example:

    >>> block = ConvBlock(channels=8, kernel_width=3, input_channels=6, padding="causal")
    >>> x = tf.ones([2, 5, 6])
    >>> block(x, residual=x).shape
    TensorShape([2, 5, 8])
    >>> y_t, weights, window = block.step(
    ...     x[:, :1], block.initial_window(2), residual=x[:, :1])
    >>> y_t.shape, weights, window.shape
    (TensorShape([2, 1, 8]), None, TensorShape([2, 2, 6]))
    """

    def __init__(
        self,
        channels: int,
        kernel_width: int,
        input_channels: int,
        residual: int = 1,
        residual_channels: int | None = None,
        padding: str = "same",
        dropout: float = 0.1,
        attention_embed_dim: int | None = None,
        dropout_layer: keras.layers.Layer | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.channels = int(channels)
        self.kernel_width = int(kernel_width)
        self.input_channels = int(input_channels)
        self.residual = int(residual)
        self.residual_channels = int(
            residual_channels if residual_channels is not None else input_channels
        )
        self.padding = padding
        self.dropout = float(dropout)
        self.attention_embed_dim = (
            int(attention_embed_dim) if attention_embed_dim is not None else None
        )
        self.dropout_layer = (
            dropout_layer if dropout_layer is not None else RandomBitsDropout(self.dropout)
        )
        self.projection = (
            WeightNormDense(
                self.channels,
                stddev=math.sqrt(1.0 / self.residual_channels),
                name="projection",
            )
            if self.residual and self.residual_channels != self.channels
            else None
        )
        self.convolution = WeightNormConv1D(
            2 * self.channels,
            self.kernel_width,
            padding=padding,
            stddev=math.sqrt(
                4.0 * (1.0 - self.dropout) / (self.kernel_width * self.input_channels)
            ),
            name="convolution",
        )
        self.glu = GLU()
        self.attention = (
            MultiStepAttention(self.channels, self.attention_embed_dim, name="attention")
            if self.attention_embed_dim is not None
            else None
        )

    def build(self, input_shape: Sequence[int | None] | None = None) -> None:
        if self.projection is not None:
            self.projection.build((None, None, self.residual_channels))
        self.convolution.build((None, None, self.input_channels))
        if self.attention is not None:
            self.attention.build()

    def call(
        self,
        inputs: tf.Tensor,
        residual: tf.Tensor | None = None,
        padding_mask: tf.Tensor | None = None,
        target_embedding: tf.Tensor | None = None,
        encoder_output: EncoderOutput | None = None,
        training: bool = False,
        return_attention: bool = False,
        kernels: FoldedKernels | None = None,
    ) -> tf.Tensor | tuple[tf.Tensor, tf.Tensor | None]:
        if padding_mask is not None:
            # Zeroing padding before the convolution makes positions next to padding see
            # exactly what they would see at a sequence edge (padding invariance).
            inputs = inputs * padding_mask
        x = self.convolution(self.dropout_layer(inputs, training=training), kernels=kernels)
        outputs, weights = self._gate(x, residual, target_embedding, encoder_output, kernels)
        return (outputs, weights) if return_attention else outputs

    def initial_window(
        self, batch_size: int | tf.Tensor, dtype: tf.DType | str | None = None
    ) -> tf.Tensor:
        """The window before the first `step`: `k - 1` zero inputs, `[batch, k-1, c_in]`."""
        return self.convolution.initial_window(
            batch_size, self.input_channels, dtype or self.compute_dtype
        )

    def step(
        self,
        inputs: tf.Tensor,
        window: tf.Tensor,
        residual: tf.Tensor | None = None,
        target_embedding: tf.Tensor | None = None,
        encoder_output: EncoderOutput | None = None,
        beam_size: int = 1,
        kernels: FoldedKernels | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor | None, tf.Tensor]:
        """Runs a causal block on one new position (inference: no dropout).

        Args:
            inputs: `[batch, 1, input_channels]`, the block input at the new position.
            window: The block's previous `k - 1` inputs (`initial_window` at first).
            residual: `[batch, 1, residual_channels]`, required when `residual > 0`.
            target_embedding: `[batch, 1, f]`, for attention.
            encoder_output: `EncoderOutput` with one row per `beam_size` consecutive
                rows of `inputs` (their sentence).
            beam_size: Hypotheses per sentence; attention then runs on the hypotheses
                grouped by sentence, so the encoder output is never repeated.
            kernels: Optional `FoldedKernels` of the block's layers.

        Returns:
            `(outputs, attention_weights, new_window)`: `[batch, 1, channels]`, the
            `[batch, 1, source]` weights (None without attention) and the shifted window.
        """
        x, new_window = self.convolution.step(inputs[:, 0, :], window, kernels=kernels)
        outputs, weights = self._gate(
            x[:, None, :], residual, target_embedding, encoder_output, kernels, beam_size
        )
        return outputs, weights, new_window

    def _gate(
        self,
        x: tf.Tensor,
        residual: tf.Tensor | None,
        target_embedding: tf.Tensor | None,
        encoder_output: Any,
        kernels: FoldedKernels | None,
        beam_size: int = 1,
    ) -> tuple[tf.Tensor, tf.Tensor | None]:
        """GLU, attention and the residual connection after the convolution."""
        x = self.glu(x)
        weights = None
        if self.attention is not None:
            x, weights = self.attention(
                _group(x, beam_size),
                _group(target_embedding, beam_size),
                encoder_output.keys,
                encoder_output.values,
                source_mask=encoder_output.source_mask,
                kernels=kernels,
            )
            x, weights = _ungroup(x, beam_size), _ungroup(weights, beam_size)
        if self.residual:
            if residual is None:
                raise ValueError(f"{self.name} has a residual connection: pass `residual`.")
            if self.projection is not None:
                residual = self.projection(residual, kernels=kernels)
            x = (x + residual) * tf.constant(math.sqrt(0.5), self.compute_dtype)
        return x, weights

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.channels,)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "channels": self.channels,
                "kernel_width": self.kernel_width,
                "input_channels": self.input_channels,
                "residual": self.residual,
                "residual_channels": self.residual_channels,
                "padding": self.padding,
                "dropout": self.dropout,
                "attention_embed_dim": self.attention_embed_dim,
            }
        )
        return config


def _group(x: tf.Tensor, beam_size: int) -> tf.Tensor:
    """`[batch * beam, 1, d]` -> `[batch, beam, d]`."""
    if beam_size == 1:
        return x
    return tf.reshape(x, [-1, beam_size, x.shape[-1]])


def _ungroup(x: tf.Tensor, beam_size: int) -> tf.Tensor:
    """`[batch, beam, d]` -> `[batch * beam, 1, d]`."""
    if beam_size == 1:
        return x
    return tf.reshape(x, [-1, 1, tf.shape(x)[-1]])
