"""The ConvS2S encoder."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers import FoldedKernels, GradientScale, WeightNormDense
from convs2s_tf.models.convs2s.conv_block import ConvBlock
from convs2s_tf.models.convs2s.conv_stack import ConvStack
from convs2s_tf.models.convs2s.encoder_output import EncoderOutput
from convs2s_tf.vocabulary import PAD_ID


@keras.saving.register_keras_serializable(package="convs2s_tf")
class ConvEncoder(ConvStack):
    """The ConvS2S encoder: embeddings, gated convolution blocks, keys and values.

    Follows the design document step by step: `e` = token + position embedding with
    dropout; `x = Linear(f -> c1)(e)`; per block (`ConvBlock`, "same" padding) padding
    zeroed, dropout, a convolution to `2 * c_out` channels, GLU and `(x + r) * sqrt(0.5)`
    with the residual `r` projected when widths differ; then `z = Linear(c_last -> f)(x)`
    with padding zeroed and its gradient scaled by `1 / (2 * attention_layers)`. Keys are
    `z`, values `(z + e) * sqrt(0.5)`.

    Args:
        vocab_size: Source vocabulary size.
        embed_dim: Embedding width `f` (also the width of keys and values).
        layers: Layer spec text (`"[(512,3)]*9"`) or list of `(channels, width[, residual])`.
        dropout: Drop probability `p`, used by every dropout and by the initialisation.
        max_positions: Rows of the position table.
        use_positions: Whether to add learned position embeddings.
        num_attention_layers: Number of decoder attention modules reading this encoder;
            sets the gradient scale `1 / (2 * num_attention_layers)`.
        pad_id: Padding token id.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> encoder = ConvEncoder(vocab_size=20, embed_dim=8, layers="[(16,3)]*2")
    >>> output = encoder(tf.constant([[5, 6, 2], [1, 7, 2]]))
    >>> output.keys.shape, output.values.shape
    (TensorShape([2, 3, 8]), TensorShape([2, 3, 8]))
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        layers: str | Sequence[Sequence[int]],
        dropout: float = 0.1,
        max_positions: int = 1024,
        use_positions: bool = True,
        num_attention_layers: int = 1,
        pad_id: int = PAD_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            vocab_size,
            embed_dim,
            layers,
            dropout=dropout,
            max_positions=max_positions,
            use_positions=use_positions,
            pad_id=pad_id,
            padding="same",
            **kwargs,
        )
        self.num_attention_layers = int(num_attention_layers)
        self.output_projection = WeightNormDense(
            self.embed_dim,
            stddev=math.sqrt(1.0 / self.layer_spec[-1].channels),
            name="output_projection",
        )
        self.gradient_scale = GradientScale(1.0 / (2.0 * max(self.num_attention_layers, 1)))

    def build(self, input_shape: Sequence[int | None] | None = None) -> None:
        super().build(input_shape)
        self.output_projection.build((None, None, self.layer_spec[-1].channels))

    def call(
        self,
        source_tokens: tf.Tensor,
        training: bool = False,
        kernels: FoldedKernels | None = None,
    ) -> EncoderOutput:
        """The `EncoderOutput` of `source_tokens` (`kernels`: optional `FoldedKernels`,
        inference)."""
        source_mask = tf.not_equal(source_tokens, self.pad_id)
        pad_zeroing = tf.cast(source_mask, self.compute_dtype)[:, :, None]
        embedded = self.embed(source_tokens, training=training)

        def apply_block(
            index: int, block: ConvBlock, x: tf.Tensor, residual: tf.Tensor | None
        ) -> tf.Tensor:
            return block(
                x,
                residual=residual,
                padding_mask=pad_zeroing,
                training=training,
                kernels=kernels,
            )

        x = self.run_blocks(self.input_projection(embedded, kernels=kernels), apply_block)
        keys = self.output_projection(x, kernels=kernels) * pad_zeroing
        keys = self.gradient_scale(keys)
        values = (keys + embedded) * tf.constant(math.sqrt(0.5), self.compute_dtype)
        return EncoderOutput(keys=keys, values=values, source_mask=source_mask)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        # Fixed for an encoder: "same" padding and no attention.
        del config["padding"], config["attention"]
        config["num_attention_layers"] = self.num_attention_layers
        return config
