"""PoseNet's decoder, one position at a time: the memory it reads, its state, its
weights, its step.

`PoseNetDecoder` takes these methods from `IncrementalPoseNetDecoding`; they follow the
decoder protocol of `convs2s_tf.decoding` (`memory`, `initial_state`, `position_axes`,
`read_step_weights`, `step`): the parallel pass's sub-layers run on the `[rows, d]` of
one position, with a state per layer and weights read once per search
(`convs2s_tf.models.posenet.step_weights`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import tensorflow as tf

from convs2s_tf.layers.folded_kernels import FoldedKernels
from convs2s_tf.models.limited_axis import LimitedAxis
from convs2s_tf.models.output_subset import OutputSubset
from convs2s_tf.models.posenet.conv_box import BoxWeights, ConvBox
from convs2s_tf.models.posenet.multi_head_attention import (
    CACHE_POSITION_AXIS,
    MEMORY_SOURCE_AXIS,
    AttentionWeights,
    MultiHeadAttention,
    cache_column,
)
from convs2s_tf.models.posenet.posenet_encoder import PoseNetEncoderOutput
from convs2s_tf.models.posenet.positionwise_ffn import PositionwiseFFN
from convs2s_tf.models.posenet.residual_norm import ResidualNorm
from convs2s_tf.models.posenet.separable_conv1d import (
    WINDOW_POSITION_AXIS,
    WindowPosition,
    window_position,
)
from convs2s_tf.models.posenet.sinusoidal_timing import SinusoidalTiming
from convs2s_tf.models.posenet.step_weights import (
    DenseWeights,
    NormWeights,
    norm_rows,
    read_norm,
    read_variable,
)


class PoseNetMemory(NamedTuple):
    """The encoder output as the decoder's steps read it: each layer's cross-attention
    keys and values, projected once per sentence (`PoseNetDecoder.memory`).

    Fields:
        keys: per decoder layer, `[batch, heads, source, head_dim]` (`step_memory`).
        values: the same for the values.
        source_mask: `[batch, source]` bool, True at real tokens.
    """

    def source_axes(self) -> "PoseNetMemory":
        """Each field's source axis (`SearchableModel.source_axes`)."""
        per_layer = tuple(MEMORY_SOURCE_AXIS for _ in self.keys)
        return PoseNetMemory(per_layer, per_layer, 1)

    keys: tuple[tf.Tensor, ...]
    values: tuple[tf.Tensor, ...]
    source_mask: tf.Tensor


@dataclasses.dataclass
class DecoderLayer:
    """The sub-layers of one decoder layer (None: switched off)."""

    self_attention: MultiHeadAttention | None
    self_attention_norm: ResidualNorm | None
    cross_attention: MultiHeadAttention
    cross_attention_norm: ResidualNorm
    box_1: ConvBox
    box_2: ConvBox
    ffn: PositionwiseFFN | None
    ffn_norm: ResidualNorm | None


class LayerStepWeights(NamedTuple):
    """The weights of one decoder layer's step, by the roles of `DecoderLayer` (None
    where it has none)."""

    self_attention: AttentionWeights | None
    self_attention_norm: NormWeights | None
    cross_attention: AttentionWeights
    cross_attention_norm: NormWeights
    box_1: BoxWeights
    box_2: BoxWeights
    ffn: tuple[DenseWeights, ...] | None
    ffn_norm: NormWeights | None


class PoseNetStepWeights(NamedTuple):
    """What `PoseNetDecoder.step` computes with, read once per search.

    Fields:
        token_table: The token table `[vocab, d]` (float32, as the embedding reads it).
        output_bias: The logits' float32 bias `[vocab]`.
        layers: Each decoder layer's `LayerStepWeights`.
        final_norm: The stack's last norm (pre-norm), or None.
    """

    token_table: tf.Tensor
    output_bias: tf.Tensor
    layers: tuple[LayerStepWeights, ...]
    final_norm: NormWeights | None


def _read_layer(layer: DecoderLayer) -> LayerStepWeights:
    def read(sublayer: Any) -> Any:
        return None if sublayer is None else sublayer.read_step_weights()

    return LayerStepWeights(**{role: read(sublayer) for role, sublayer in vars(layer).items()})


class IncrementalPoseNetDecoding:
    """The incremental half of `PoseNetDecoder` (a mixin: the attributes below are the
    decoder's, set by its constructor)."""

    decoder_layers: list[DecoderLayer]
    hidden_dim: int
    timing: SinusoidalTiming
    final_norm: Any
    cross_attention_placement: str
    compute_dtype: Any
    token_embedding: Any
    _add_timing: Callable[[tf.Tensor, tf.Tensor, int], tf.Tensor]
    output_product: Callable[..., tf.Tensor]
    output_bias: Any

    def memory(self, encoder_output: PoseNetEncoderOutput) -> PoseNetMemory:
        """Projects the encoder output once per sentence for every layer's steps."""
        keys, values = [], []
        for layer in self.decoder_layers:
            layer_keys, layer_values = layer.cross_attention.step_memory(encoder_output.hidden)
            keys.append(layer_keys)
            values.append(layer_values)
        return PoseNetMemory(tuple(keys), tuple(values), encoder_output.source_mask)

    def initial_state(
        self, batch_size: int | tf.Tensor, positions: int | tf.Tensor = 0
    ) -> tuple[dict[str, Any], ...]:
        """Per layer: the self-attention's zero key and value buffers and the boxes' zero
        windows, with room for `positions` positions (a window: up to its span), grown
        by the search."""
        state = []
        for layer in self.decoder_layers:
            layer_state: dict[str, Any] = {
                "box_1": layer.box_1.initial_state(batch_size, self.hidden_dim, positions),
                "box_2": layer.box_2.initial_state(batch_size, self.hidden_dim, positions),
            }
            if layer.self_attention is not None:
                layer_state["self_attention"] = layer.self_attention.initial_cache(
                    batch_size, positions
                )
            state.append(layer_state)
        return tuple(state)

    def position_axes(self, incremental_state: Sequence[dict[str, Any]]) -> Any:
        """The self-attention buffers' position axis; the boxes' windows', limited to
        each convolution's span (`LimitedAxis`)."""

        def axes(layer: DecoderLayer, name: str, part: Any) -> Any:
            if name == "self_attention":
                return tf.nest.map_structure(lambda _: CACHE_POSITION_AXIS, part)
            box = getattr(layer, name)
            return tuple(LimitedAxis(WINDOW_POSITION_AXIS, span) for span in box.window_spans)

        return tuple(
            {name: axes(layer, name, part) for name, part in layer_state.items()}
            for layer, layer_state in zip(self.decoder_layers, incremental_state)
        )

    def read_step_weights(self) -> PoseNetStepWeights:
        """The weights of `step`, read and cast once: the search reads them where it is
        traced and passes them to every step (`make_inference_model`), so its loop
        reads no variable."""
        final = None if self.final_norm is None else read_norm(self.final_norm)
        return PoseNetStepWeights(
            token_table=read_variable(self.token_embedding.embeddings, tf.float32),
            output_bias=read_variable(self.output_bias, tf.float32),
            layers=tuple(_read_layer(layer) for layer in self.decoder_layers),
            final_norm=final,
        )

    def step(
        self,
        tokens: tf.Tensor,
        step: int | tf.Tensor,
        incremental_state: Sequence[dict[str, Any]],
        encoder_output: PoseNetMemory,
        beam_size: int = 1,
        output_subset: OutputSubset | None = None,
        kernels: FoldedKernels | None = None,
        step_weights: PoseNetStepWeights | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor, tuple[dict[str, Any], ...]]:
        """Decodes position `step` for every hypothesis (see `IncrementalDecoder`;
        `kernels`: the `FoldedKernels` holding the folded output table; `step_weights`:
        `read_step_weights()`, or None: read now)."""
        weights = step_weights or self.read_step_weights()
        scale = tf.constant(math.sqrt(self.hidden_dim), self.compute_dtype)
        x = tf.cast(tf.gather(weights.token_table, tokens), self.compute_dtype) * scale
        signal = self.timing.step_signal(step)
        bias = self.decoder_layers[0].cross_attention.padding_bias(
            encoder_output.source_mask, None, self.compute_dtype
        )
        column = None
        # Where the boxes write their windows, and their columns' ages: one per span.
        positions: dict[int, WindowPosition] = {}
        for layer, state in zip(self.decoder_layers, incremental_state):
            for box in ("box_1", "box_2"):
                for span, window in zip(getattr(layer, box).window_spans, state[box]):
                    if span not in positions:
                        positions[span] = window_position(window, step, span)
        new_state, attention = [], []

        def attend(index: int, layer: DecoderLayer, x: tf.Tensor) -> tf.Tensor:
            norm = weights.layers[index].cross_attention_norm
            attended, layer_attention = layer.cross_attention.attend_memory(
                layer.cross_attention_norm.branch_rows(x, norm),
                encoder_output.keys[index],
                encoder_output.values[index],
                bias,
                beam_size=beam_size,
                return_weights=True,
                weights=weights.layers[index].cross_attention,
            )
            attention.append(layer_attention)
            return layer.cross_attention_norm.join_rows(x, attended, norm)

        for index, (layer, state) in enumerate(zip(self.decoder_layers, incremental_state)):
            layer_weights = weights.layers[index]
            x = self._add_timing(x, signal, index)
            layer_state = dict(state)
            if layer.self_attention is not None and layer.self_attention_norm is not None:
                # Where the step writes, and what it sees: the same in every layer.
                column = column or cache_column(state["self_attention"]["keys"], step)
                norm = layer_weights.self_attention_norm
                attended, layer_state["self_attention"] = layer.self_attention.step(
                    layer.self_attention_norm.branch_rows(x, norm),
                    state["self_attention"],
                    step,
                    weights=layer_weights.self_attention,
                    column=column,
                )
                x = layer.self_attention_norm.join_rows(x, attended, norm)
            if self.cross_attention_placement == "before":
                x = attend(index, layer, x)
            y, layer_state["box_1"] = layer.box_1.step(
                x, state["box_1"], step, layer_weights.box_1, positions
            )
            z, layer_state["box_2"] = layer.box_2.step(
                x + y, state["box_2"], step, layer_weights.box_2, positions
            )
            x = x + y + z
            if self.cross_attention_placement == "after":
                x = attend(index, layer, x)
            if layer.ffn is not None and layer.ffn_norm is not None:
                norm = layer_weights.ffn_norm
                update = layer.ffn.step(layer.ffn_norm.branch_rows(x, norm), layer_weights.ffn)
                x = layer.ffn_norm.join_rows(x, update, norm)
            new_state.append(layer_state)
        if weights.final_norm is not None:
            x = norm_rows(x, weights.final_norm)
        if output_subset is None:
            product = self.output_product(x, kernels, weights.token_table)
            logits = tf.cast(product, tf.float32) + weights.output_bias
        else:
            # As `output_logits`: the product in the compute dtype, the bias in float32.
            columns = tf.cast(output_subset.product(x), tf.float32)
            logits = columns + tf.cast(output_subset.bias, tf.float32)
        return logits, tf.add_n(attention) / float(len(attention)), tuple(new_state)
