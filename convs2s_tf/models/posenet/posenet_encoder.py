"""PoseNet's encoder: position signal, two convolution boxes, feed-forward net, per layer."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import keras
import tensorflow as tf

from convs2s_tf.layers import RandomBitsDropout
from convs2s_tf.models.posenet.conv_box import ConvBox
from convs2s_tf.models.posenet.multi_head_attention import MultiHeadAttention
from convs2s_tf.models.posenet.positionwise_ffn import PositionwiseFFN
from convs2s_tf.models.posenet.residual_norm import ResidualNorm
from convs2s_tf.models.posenet.sinusoidal_timing import SinusoidalTiming
from convs2s_tf.models.posenet.sublayers import (
    attention_sublayer,
    build_layer,
    ffn_sublayer,
    final_norm,
    token_embedding,
    track_layer,
)
from convs2s_tf.vocabulary import PAD_ID

# Kernel widths of the two boxes' convolutions (SliceNet's 3, 7 | 15, 31).
KERNELS = (3, 7, 15, 31)
ENCODER_TIMINGS = ("every_layer", "input")


@dataclasses.dataclass
class EncoderLayer:
    """The sub-layers of one encoder layer (None: switched off)."""

    box_1: ConvBox
    box_2: ConvBox
    attention: MultiHeadAttention | None
    attention_norm: ResidualNorm | None
    ffn: PositionwiseFFN | None
    ffn_norm: ResidualNorm | None


class PoseNetEncoderOutput(NamedTuple):
    """What the encoder hands to the decoder.

    Fields:
        hidden: `[batch, source, hidden_dim]`, zero at padding.
        source_mask: `[batch, source]` bool, True at real tokens.
    """

    hidden: tf.Tensor
    source_mask: tf.Tensor


def parse_dilations(scheme: str) -> tuple[int, ...]:
    """Returns the four dilations of a scheme like `"1.1.2.4"` (one per kernel of `KERNELS`).

    Raises:
        ValueError: for anything but four positive integers joined by dots.
    """
    parts = scheme.split(".")
    if len(parts) != len(KERNELS) or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise ValueError(
            f"A dilation scheme is {len(KERNELS)} positive integers joined by dots, like "
            f"'1.1.2.4'; got {scheme!r}."
        )
    return tuple(int(part) for part in parts)


def parse_groups(groups: int | str) -> tuple[int, int]:
    """Returns the channel groups of each box's two convolutions: one number for both
    (`2`, `"2"`), or two joined by a dot (`"3.2"`: SliceNet's separability -2, its
    "super-separable" boxes).

    Raises:
        ValueError: for anything but one or two positive integers.

    >>> parse_groups("3.2"), parse_groups(1)
    ((3, 2), (1, 1))
    """
    parts = str(groups).split(".")
    if len(parts) not in (1, 2) or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise ValueError(
            f"groups is a positive integer, or two joined by a dot like '3.2'; got {groups!r}."
        )
    counts = tuple(int(part) for part in parts)
    return (counts[0], counts[-1])


@keras.saving.register_keras_serializable(package="convs2s_tf")
class PoseNetEncoder(keras.layers.Layer):
    """The encoder of PoseNet (section 4 of the paper), SliceNet's boxes filling its gaps.

    Tokens are embedded and scaled by `sqrt(hidden_dim)`; each of `num_layers` layers:

        x = x + timing              # every layer, or only before the first ("input")
        x = x * mask
        y = box_1(x)                # kernels 3, 7
        x = x + y + box_2(x + y)    # kernels 15, 31
        x = Norm(x, SelfAttention(x))       # optional
        x = Norm(x, FFN(x)) * mask

    with the dilations of `dilation_scheme` and `"same"` padding. `Norm` is a
    `ResidualNorm`: the paper's `norm(x + f(x))` (`norm_placement="post"`), or
    `x + f(norm(x))` with one more norm at the end of the stack (`"pre"`).

    Args:
        vocab_size: Source vocabulary size.
        hidden_dim: Width `d` of every layer.
        num_layers: Encoder layers (the paper: 6).
        dilation_scheme: Dilations of the four convolutions, e.g. `"1.1.2.4"`.
        groups: Channel groups of each box's two separable convolutions (`parse_groups`:
            `2`, or `"3.2"` for SliceNet's separability -2).
        ffn_dim: Width of the feed-forward nets' inner layers.
        ffn_layers: Linear maps of each feed-forward net (0: no feed-forward net).
        num_heads: Heads of the optional self-attention.
        self_attention: Add a self-attention sub-layer to every layer.
        timing: `"every_layer"` or `"input"`.
        dropout: Drop probability after the embedding and in the sub-layers.
        attention_dropout: Drop probability of the attention weights.
        norm_placement: `"post"` (the paper's) or `"pre"` (see `ResidualNorm`).
        max_positions: The longest source (with its `</s>`) the encoder accepts.
        pad_id: Padding token id.
        shared_embedding: A token table made by the model for both stacks (its
            `share_all_embeddings`), or None: the stack's own.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> encoder = PoseNetEncoder(vocab_size=20, hidden_dim=8, num_layers=1, ffn_dim=16,
    ...                          num_heads=2)
    >>> encoder(tf.constant([[5, 6, 2], [7, 2, 1]])).hidden.shape
    TensorShape([2, 3, 8])
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_dim: int = 256,
        num_layers: int = 6,
        dilation_scheme: str = "1.1.2.4",
        groups: int | str = 1,
        ffn_dim: int = 1024,
        ffn_layers: int = 2,
        num_heads: int = 8,
        self_attention: bool = False,
        timing: str = "every_layer",
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        norm_placement: str = "post",
        max_positions: int = 1024,
        pad_id: int = PAD_ID,
        shared_embedding: keras.layers.Embedding | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if timing not in ENCODER_TIMINGS:
            raise ValueError(f"timing must be one of {ENCODER_TIMINGS}, got {timing!r}.")
        if int(num_layers) < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}.")
        self.vocab_size = int(vocab_size)
        self.hidden_dim = int(hidden_dim)
        self.num_layers = int(num_layers)
        self.dilation_scheme = dilation_scheme
        self.dilations = parse_dilations(dilation_scheme)
        self.groups = groups
        box_groups = parse_groups(groups)
        self.ffn_dim = int(ffn_dim)
        self.ffn_layers = int(ffn_layers)
        self.num_heads = int(num_heads)
        self.self_attention = bool(self_attention)
        self.timing_placement = timing
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.norm_placement = norm_placement
        self.max_positions = int(max_positions)
        self.pad_id = int(pad_id)
        self.token_embedding = shared_embedding or token_embedding(self.vocab_size, self.hidden_dim)
        self.timing = SinusoidalTiming(self.hidden_dim, pad_id=self.pad_id, name="timing")
        self.embedding_dropout = RandomBitsDropout(self.dropout)
        self.encoder_layers: list[EncoderLayer] = []
        convolutions = list(zip(KERNELS, self.dilations))
        for index in range(self.num_layers):
            # Made in the layer's order, so the layers' automatic names stay the same.
            box_1 = ConvBox(self.hidden_dim, convolutions[:2], groups=box_groups)
            box_2 = ConvBox(self.hidden_dim, convolutions[2:], groups=box_groups)
            attention, attention_norm = attention_sublayer(
                self.self_attention,
                self.num_heads,
                self.attention_dropout,
                self.dropout,
                norm_placement,
            )
            ffn, ffn_norm = ffn_sublayer(
                self.ffn_dim, self.ffn_layers, self.dropout, norm_placement
            )
            layer = EncoderLayer(
                box_1=box_1,
                box_2=box_2,
                attention=attention,
                attention_norm=attention_norm,
                ffn=ffn,
                ffn_norm=ffn_norm,
            )
            track_layer(self, layer, index)
            self.encoder_layers.append(layer)
        self.final_norm = final_norm(norm_placement)

    @property
    def max_length(self) -> int:
        """The longest source, its `</s>` included."""
        return self.max_positions

    def build(self, input_shape: Sequence[int | None] | None = None) -> None:
        if not self.token_embedding.built:  # (a shared table is built once)
            self.token_embedding.build((None, None))
        for layer in self.encoder_layers:
            build_layer(layer, self.hidden_dim)
        if self.final_norm is not None:
            self.final_norm.build((None, None, self.hidden_dim))

    def call(self, source_tokens: tf.Tensor, training: bool = False) -> PoseNetEncoderOutput:
        source_mask = tf.not_equal(source_tokens, self.pad_id)
        mask = tf.cast(source_mask, self.compute_dtype)
        scale = tf.constant(math.sqrt(self.hidden_dim), self.compute_dtype)
        x = self.token_embedding(source_tokens) * scale
        x = self.embedding_dropout(x, training=training)
        signal = self.timing(source_tokens)
        for index, layer in enumerate(self.encoder_layers):
            if index == 0 or self.timing_placement == "every_layer":
                x = x + signal
            x = x * mask[..., None]
            y = layer.box_1(x, padding_mask=mask, training=training)
            x = x + y + layer.box_2(x + y, padding_mask=mask, training=training)
            if layer.attention is not None and layer.attention_norm is not None:
                attended = layer.attention(
                    layer.attention_norm.branch_input(x, training),
                    padding_mask=mask,
                    training=training,
                )
                x = layer.attention_norm(x, attended, training=training)
            if layer.ffn is not None and layer.ffn_norm is not None:
                update = layer.ffn(layer.ffn_norm.branch_input(x, training), training=training)
                x = layer.ffn_norm(x, update, training=training)
            x = x * mask[..., None]
        if self.final_norm is not None:
            x = self.final_norm(x, training=training) * mask[..., None]
        return PoseNetEncoderOutput(hidden=x, source_mask=source_mask)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "hidden_dim": self.hidden_dim,
                "num_layers": self.num_layers,
                "dilation_scheme": self.dilation_scheme,
                "groups": self.groups,
                "ffn_dim": self.ffn_dim,
                "ffn_layers": self.ffn_layers,
                "num_heads": self.num_heads,
                "self_attention": self.self_attention,
                "timing": self.timing_placement,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "norm_placement": self.norm_placement,
                "max_positions": self.max_positions,
                "pad_id": self.pad_id,
            }
        )
        return config
