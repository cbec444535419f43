"""What the ConvS2S encoder and decoder share: embeddings, input projection, blocks."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers import (
    LearnedPositionalEmbedding,
    PaddedNormal,
    RandomBitsDropout,
    WeightNormDense,
)
from convs2s_tf.layers.checkpoint_tracking import track_for_checkpoint
from convs2s_tf.models.convs2s.conv_block import ConvBlock
from convs2s_tf.models.convs2s.layer_spec import (
    format_layer_spec,
    normalise_layer_spec,
    parse_attention_spec,
)
from convs2s_tf.vocabulary import PAD_ID

# How a block's layers are named in checkpoints (`convolution_3`, ...), by role and index.
_CHECKPOINT_ROLES = ("projection", "convolution", "attention")


@keras.saving.register_keras_serializable(package="convs2s_tf")
class ConvStack(keras.layers.Layer):
    """The base of `ConvEncoder` and `ConvDecoder`: embeddings, input projection, blocks.

    `embed` computes `e` = token + position embedding (`N(0, 0.1)` tables with a zero
    pad row) with dropout, `input_projection` maps it to the first block's width
    (`v ~ N(0, sqrt((1 - p) / f))`), and `run_blocks` feeds that through one `ConvBlock`
    per entry of the layer spec, giving each block the residual input its residual
    distance names. One dropout layer serves the whole stack.

    Checkpoints name a block's layers by role and index: each block's layers are
    checkpoint dependencies named `projection_<i>`, `convolution_<i>` and `attention_<i>`
    (Keras 3 lists are invisible to `tf.train.Checkpoint`), and `variables` lists every
    residual projection, then every convolution, then every attention, the order
    optimizer slots are saved in. `projections`, `convolutions` and `attentions` hold
    those layers per block (None where a block has none).

    Args:
        vocab_size: Vocabulary size.
        embed_dim: Embedding width `f`.
        layers: Layer spec text (`"[(512,3)]*9"`) or list of `(channels, width[, residual])`.
        dropout: Drop probability `p`, used by every dropout and by the initialisation.
        max_positions: Rows of the position table.
        use_positions: Whether to add learned position embeddings.
        pad_id: Padding token id.
        padding: The blocks' convolution padding, `"same"` or `"causal"`.
        attention: Which blocks attend (to keys and values of width `embed_dim`): True
            (all), False or None (none), a list of booleans or their text.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> stack = ConvStack(vocab_size=20, embed_dim=8, layers="[(16, 3)] * 2")
    >>> stack.build()
    >>> x = stack.run_blocks(
    ...     stack.input_projection(stack.embed(tf.constant([[5, 6, 2]]))),
    ...     lambda index, block, x, residual: block(x, residual=residual))
    >>> x.shape
    TensorShape([1, 3, 16])
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        layers: str | Sequence[Sequence[int]],
        dropout: float = 0.1,
        max_positions: int = 1024,
        use_positions: bool = True,
        pad_id: int = PAD_ID,
        padding: str = "same",
        attention: bool | str | Sequence[bool] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.embed_dim = int(embed_dim)
        self.layer_spec = normalise_layer_spec(layers)
        self.dropout = float(dropout)
        self.max_positions = int(max_positions)
        self.use_positions = bool(use_positions)
        self.pad_id = int(pad_id)
        self.padding = padding
        self.attention_spec = parse_attention_spec(
            attention if attention is not None else False, len(self.layer_spec)
        )

        self.token_embedding = keras.layers.Embedding(
            self.vocab_size,
            self.embed_dim,
            embeddings_initializer=PaddedNormal(stddev=0.1, pad_id=self.pad_id),
            name="token_embedding",
        )
        self.position_embedding = (
            LearnedPositionalEmbedding(
                self.max_positions, self.embed_dim, pad_id=self.pad_id, name="position_embedding"
            )
            if self.use_positions
            else None
        )
        self.dropout_layer = RandomBitsDropout(self.dropout)
        self.input_projection = WeightNormDense(
            self.layer_spec[0].channels,
            stddev=math.sqrt((1.0 - self.dropout) / self.embed_dim),
            name="input_projection",
        )
        blocks = self._make_blocks()
        # Tracked before the blocks, so that Keras lists their variables in this order.
        self.projections = [block.projection for block in blocks]
        self.convolutions = [block.convolution for block in blocks]
        self.attentions = [block.attention for block in blocks]
        self.blocks = blocks
        track_for_checkpoint(
            self,
            [
                (f"{role}_{index}", getattr(block, role))
                for index, block in enumerate(blocks)
                for role in _CHECKPOINT_ROLES
                if getattr(block, role) is not None
            ],
        )

    def _make_blocks(self) -> list[ConvBlock]:
        widths = [self.layer_spec[0].channels]
        blocks = []
        for index, layer in enumerate(self.layer_spec):
            blocks.append(
                ConvBlock(
                    layer.channels,
                    layer.kernel_width,
                    input_channels=widths[-1],
                    residual=layer.residual,
                    residual_channels=widths[-layer.residual] if layer.residual else None,
                    padding=self.padding,
                    dropout=self.dropout,
                    attention_embed_dim=self.embed_dim if self.attention_spec[index] else None,
                    dropout_layer=self.dropout_layer,
                    name=f"block_{index}",
                )
            )
            widths.append(layer.channels)
        return blocks

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def max_length(self) -> int:
        """The longest sequence (its `</s>` included) the position table can embed."""
        return self.max_positions - self.pad_id - 1

    def build(self, input_shape: Sequence[int | None] | None = None) -> None:
        self.token_embedding.build((None, None))
        if self.position_embedding is not None:
            self.position_embedding.build((None, None))
        self.input_projection.build((None, None, self.embed_dim))
        for block in self.blocks:
            block.build()

    def embed(
        self, tokens: tf.Tensor, training: bool = False, step: int | tf.Tensor | None = None
    ) -> tf.Tensor:
        """`e`: token plus position embedding (of incremental `step` if given), with
        dropout."""
        embedded = self.token_embedding(tokens)
        if self.position_embedding is not None:
            if step is None:
                embedded = embedded + self.position_embedding(tokens)
            else:
                embedded = embedded + self.position_embedding.step_embedding(step)
        return self.dropout_layer(embedded, training=training)

    def run_blocks(
        self,
        x: tf.Tensor,
        apply_block: Callable[[int, ConvBlock, tf.Tensor, tf.Tensor | None], tf.Tensor],
    ) -> tf.Tensor:
        """Feeds `x` through the blocks in order.

        Args:
            x: The input projection's output.
            apply_block: `apply_block(index, block, x, residual)` runs block `index` on
                `x` with its residual input (None for a block without residual) and
                returns its output.

        Returns:
            The last block's output.
        """
        block_inputs = [x]
        for index, block in enumerate(self.blocks):
            residual = block_inputs[-block.residual] if block.residual else None
            x = apply_block(index, block, x, residual)
            block_inputs.append(x)
        return x

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "embed_dim": self.embed_dim,
                "layers": format_layer_spec(self.layer_spec),
                "dropout": self.dropout,
                "max_positions": self.max_positions,
                "use_positions": self.use_positions,
                "pad_id": self.pad_id,
                "padding": self.padding,
                "attention": list(self.attention_spec),
            }
        )
        return config
