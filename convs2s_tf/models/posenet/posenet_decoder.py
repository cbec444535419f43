"""PoseNet's decoder: attention before causal convolution boxes (its incremental step:
`posenet_decoder_step`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers import RandomBitsDropout
from convs2s_tf.layers.folded_kernels import FoldedKernels, TiedTableFolding
from convs2s_tf.layers.int8_kernel import Int8Kernel, kernel_product
from convs2s_tf.models.output_subset import OutputSubset, select_columns
from convs2s_tf.models.posenet.conv_box import ConvBox
from convs2s_tf.models.posenet.posenet_decoder_step import (
    DecoderLayer,
    IncrementalPoseNetDecoding,
)
from convs2s_tf.models.posenet.posenet_encoder import (
    KERNELS,
    PoseNetEncoderOutput,
    parse_dilations,
    parse_groups,
)
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

DECODER_TIMINGS = ("none", "once", "every_layer")
CROSS_ATTENTION_PLACEMENTS = ("before", "after")


@keras.saving.register_keras_serializable(package="convs2s_tf")
class PoseNetDecoder(IncrementalPoseNetDecoding, TiedTableFolding, keras.layers.Layer):
    """The decoder of PoseNet (section 4 of the paper), SliceNet's boxes filling its gaps.

    The decoder input (`</s>`, then the target shifted right) is embedded and scaled by
    `sqrt(hidden_dim)`, the position signal added once (or never, or before every
    layer); each of `num_layers` layers:

        x = Norm(x, MaskedSelfAttention(x))      # optional
        x = Norm(x, CrossAttention(x, source))   # "before" the boxes (or "after")
        y = causal_box_1(x)                      # kernels 3, 7
        x = x + y + causal_box_2(x + y)          # kernels 15, 31
        x = Norm(x, FFN(x))                      # optional

    `Norm` is a `ResidualNorm`: the paper's `norm(x + f(x))` (`norm_placement="post"`),
    or `x + f(norm(x))` with one more norm after the last layer (`"pre"`). Logits are the
    features times the token table (tied) plus a bias. `step` decodes one position from a
    state of, per layer, the self-attention's key and value buffers (which grow with the
    positions decoded: `position_axes`) and one window per causal convolution.

    Args:
        vocab_size: Target vocabulary size.
        hidden_dim: Width `d`.
        num_layers: Decoder layers (the paper: 5).
        dilation_scheme: Dilations of the four causal convolutions (the paper: none).
        groups: Channel groups of each box's two separable convolutions (`parse_groups`).
        ffn_dim: Inner width of the feed-forward nets.
        ffn_layers: Linear maps of each feed-forward net (0: none).
        num_heads: Attention heads.
        self_attention: Masked self-attention in every layer.
        cross_attention: `"before"` or `"after"` the convolution boxes.
        timing: `"none"`, `"once"` or `"every_layer"`.
        dropout: Drop probability after the embedding and in the sub-layers.
        attention_dropout: Drop probability of the attention weights.
        norm_placement: `"post"` (the paper's) or `"pre"` (see `ResidualNorm`).
        max_positions: The longest decoder input the model accepts.
        pad_id: Padding token id.
        shared_embedding: A token table made by the model for both stacks (its
            `share_all_embeddings`), or None: the stack's own.
        **kwargs: Standard `keras.layers.Layer` arguments.
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_dim: int = 256,
        num_layers: int = 5,
        dilation_scheme: str = "1.1.1.1",
        groups: int | str = 1,
        ffn_dim: int = 1024,
        ffn_layers: int = 2,
        num_heads: int = 8,
        self_attention: bool = True,
        cross_attention: str = "before",
        timing: str = "once",
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        norm_placement: str = "post",
        max_positions: int = 1024,
        pad_id: int = PAD_ID,
        shared_embedding: keras.layers.Embedding | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if timing not in DECODER_TIMINGS:
            raise ValueError(f"timing must be one of {DECODER_TIMINGS}, got {timing!r}.")
        if cross_attention not in CROSS_ATTENTION_PLACEMENTS:
            raise ValueError(
                f"cross_attention must be one of {CROSS_ATTENTION_PLACEMENTS}, got "
                f"{cross_attention!r}."
            )
        self.vocab_size = int(vocab_size)
        self.hidden_dim = int(hidden_dim)
        self.num_layers = int(num_layers)
        self.dilation_scheme = dilation_scheme
        self.groups = groups
        self.ffn_dim = int(ffn_dim)
        self.ffn_layers = int(ffn_layers)
        self.num_heads = int(num_heads)
        self.use_self_attention = bool(self_attention)
        self.cross_attention_placement = cross_attention
        self.timing_placement = timing
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.norm_placement = norm_placement
        self.max_positions = int(max_positions)
        self.pad_id = int(pad_id)
        self.token_embedding = shared_embedding or token_embedding(self.vocab_size, self.hidden_dim)
        self.timing = SinusoidalTiming(self.hidden_dim, pad_id=self.pad_id, name="timing")
        self.embedding_dropout = RandomBitsDropout(self.dropout)
        convolutions = list(zip(KERNELS, parse_dilations(dilation_scheme)))
        self.decoder_layers = [self._make_layer(index, convolutions) for index in range(num_layers)]
        self.final_norm = final_norm(norm_placement)

    def _make_layer(self, index: int, convolutions: list[tuple[int, int]]) -> DecoderLayer:
        def box(part: list[tuple[int, int]]) -> ConvBox:
            return ConvBox(
                self.hidden_dim, part, padding="causal", groups=parse_groups(self.groups)
            )

        # Any: `attention_sublayer`'s (MultiHeadAttention | None, ResidualNorm | None) is
        # never None when `enabled` (the cross-attention's), which the union cannot say.
        def attention(enabled: bool) -> tuple[Any, Any]:
            return attention_sublayer(
                enabled, self.num_heads, self.attention_dropout, self.dropout, self.norm_placement
            )

        self_attention, self_attention_norm = attention(self.use_self_attention)
        cross_attention, cross_attention_norm = attention(True)
        # Made in the layer's order, so the layers' automatic names stay the same.
        box_1, box_2 = box(convolutions[:2]), box(convolutions[2:])
        ffn, ffn_norm = ffn_sublayer(
            self.ffn_dim, self.ffn_layers, self.dropout, self.norm_placement
        )
        layer = DecoderLayer(
            self_attention=self_attention,
            self_attention_norm=self_attention_norm,
            cross_attention=cross_attention,
            cross_attention_norm=cross_attention_norm,
            box_1=box_1,
            box_2=box_2,
            ffn=ffn,
            ffn_norm=ffn_norm,
        )
        track_layer(self, layer, index)
        return layer

    @property
    def max_length(self) -> int:
        """The longest decoder input, its leading `</s>` included."""
        return self.max_positions

    def build(self, input_shape: Sequence[int | None] | None = None) -> None:
        if not self.token_embedding.built:  # (a shared table is built once)
            self.token_embedding.build((None, None))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocab_size,), initializer="zeros"
        )
        for layer in self.decoder_layers:
            build_layer(layer, self.hidden_dim, two_input_roles=("cross_attention",))
        if self.final_norm is not None:
            self.final_norm.build((None, None, self.hidden_dim))

    # ------------------------------------------------------------ parallel pass
    def features(
        self,
        target_input: tf.Tensor,
        encoder_output: PoseNetEncoderOutput,
        training: bool = False,
        return_attention: bool | str = False,
    ) -> tf.Tensor | tuple[tf.Tensor, Any]:
        """The inputs of the vocabulary projection, `[batch, target, hidden_dim]`; with
        `return_attention`, also the cross-attention weights averaged over heads,
        `[batch, target, source]`: over layers too (True), or a list per layer
        (`"per_layer"`)."""
        mask = tf.cast(tf.not_equal(target_input, self.pad_id), self.compute_dtype)
        x = self._embed(target_input, training)
        signal = self.timing(target_input)
        source_mask = encoder_output.source_mask
        weights = []

        def attend(layer: DecoderLayer, x: tf.Tensor) -> tf.Tensor:
            attended, layer_weights = layer.cross_attention(
                layer.cross_attention_norm.branch_input(x, training),
                encoder_output.hidden,
                padding_mask=source_mask,
                training=training,
                return_weights=True,
            )
            weights.append(layer_weights)
            return layer.cross_attention_norm(x, attended, training=training)

        for index, layer in enumerate(self.decoder_layers):
            x = self._add_timing(x, signal, index)
            if layer.self_attention is not None and layer.self_attention_norm is not None:
                attended = layer.self_attention(
                    layer.self_attention_norm.branch_input(x, training),
                    causal=True,
                    training=training,
                )
                x = layer.self_attention_norm(x, attended, training=training)
            if self.cross_attention_placement == "before":
                x = attend(layer, x)
            y = layer.box_1(x, padding_mask=mask, training=training)
            x = x + y + layer.box_2(x + y, padding_mask=mask, training=training)
            if self.cross_attention_placement == "after":
                x = attend(layer, x)
            if layer.ffn is not None and layer.ffn_norm is not None:
                update = layer.ffn(layer.ffn_norm.branch_input(x, training), training=training)
                x = layer.ffn_norm(x, update, training=training)
        if self.final_norm is not None:
            x = self.final_norm(x, training=training)
        if return_attention == "per_layer":
            return x, weights
        if return_attention:
            return x, tf.add_n(weights) / float(len(weights))
        return x

    def call(
        self,
        target_input: tf.Tensor,
        encoder_output: PoseNetEncoderOutput,
        training: bool = False,
        return_attention: bool = False,
    ) -> tf.Tensor | tuple[tf.Tensor, tf.Tensor]:
        """Float32 logits `[batch, target, vocab]` of every position (teacher forcing);
        `return_attention` adds the averaged cross-attention weights."""
        if return_attention:
            features, attention = self.features(target_input, encoder_output, training, True)
            return self.output_logits(features), attention
        return self.output_logits(self.features(target_input, encoder_output, training))

    @property
    def output_table_is_tied(self) -> bool:
        """Always: the token table is the output projection (`TiedTableFolding`)."""
        return True

    def unbiased_output_logits(
        self, features: tf.Tensor, kernels: FoldedKernels | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """`(features x token table^T, float32 bias)`: the loss adds the bias itself.
        With `kernels` (`FoldedKernels`, inference) the table's folded transpose is read,
        in order."""
        return self.output_product(features, kernels), tf.cast(self.output_bias, tf.float32)

    def output_product(
        self,
        features: tf.Tensor,
        kernels: FoldedKernels | None = None,
        table: tf.Tensor | None = None,
    ) -> tf.Tensor:
        """`features x token table^T` in the compute dtype, from the folded table in
        `kernels`, else from `table` (the table read already), else from the variable."""
        folded = kernels.kernel(self) if kernels is not None else None
        if folded is not None:
            return kernel_product(features, folded)
        table = self.token_embedding.embeddings if table is None else table
        return tf.matmul(features, tf.cast(table, self.compute_dtype), transpose_b=True)

    def output_logits(self, features: tf.Tensor, kernels: FoldedKernels | None = None) -> tf.Tensor:
        """Float32 logits of `[..., hidden_dim]` features (the tied projection and bias;
        `kernels`: optional `FoldedKernels`)."""
        shape = tf.shape(features)
        rows = tf.reshape(features, [-1, self.hidden_dim])
        logits, bias = self.unbiased_output_logits(rows, kernels)
        logits = tf.cast(logits, tf.float32) + bias
        return tf.reshape(logits, tf.concat([shape[:-1], [self.vocab_size]], 0))

    def select_outputs(
        self, ids: tf.Tensor, valid: tf.Tensor, kernels: FoldedKernels | None = None
    ) -> OutputSubset:
        """The `OutputSubset` of target `ids` (a shortlist; see `ShortlistDecoder`),
        read from the folded table in `kernels` when it is int8."""
        folded = kernels.kernel(self) if kernels is not None else None
        if isinstance(folded, Int8Kernel):  # the table's transpose, in int8
            return select_columns(folded, 1, self.output_bias, ids, valid, self.compute_dtype)
        table = self.token_embedding.embeddings
        return select_columns(table, 0, self.output_bias, ids, valid, self.compute_dtype)

    def _embed(self, tokens: tf.Tensor, training: bool) -> tf.Tensor:
        scale = tf.constant(math.sqrt(self.hidden_dim), self.compute_dtype)
        x = self.token_embedding(tokens) * scale
        return self.embedding_dropout(x, training=training)

    def _add_timing(self, x: tf.Tensor, signal: tf.Tensor, index: int) -> tf.Tensor:
        if self.timing_placement == "every_layer" or (
            self.timing_placement == "once" and index == 0
        ):
            return x + signal
        return x

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
                "self_attention": self.use_self_attention,
                "cross_attention": self.cross_attention_placement,
                "timing": self.timing_placement,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "norm_placement": self.norm_placement,
                "max_positions": self.max_positions,
                "pad_id": self.pad_id,
            }
        )
        return config
