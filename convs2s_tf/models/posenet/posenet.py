"""PoseNet as a subclassed Keras model: encoder, decoder, and what the toolkit reads."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers.folded_kernels import FoldedKernels
from convs2s_tf.models.encoder_decoder import EncoderDecoderModel
from convs2s_tf.models.posenet.posenet_decoder import PoseNetDecoder
from convs2s_tf.models.posenet.posenet_decoder_step import PoseNetMemory
from convs2s_tf.models.posenet.posenet_encoder import PoseNetEncoder, parse_groups
from convs2s_tf.models.posenet.sublayers import token_embedding
from convs2s_tf.vocabulary import PAD_ID


@keras.saving.register_keras_serializable(package="convs2s_tf")
class PoseNet(EncoderDecoderModel):
    """PoseNet (Chen and Wu, 2018): SliceNet's convolution boxes with stronger position
    signals, attention before the decoder's boxes (docs/posenet.md).

    Calling the model runs teacher forcing: `model({"source": [B, S], "target_input":
    [B, T]})` returns float32 logits `[B, T, target_vocab_size]`. `encode` (the encoder
    output projected for every decoder layer's cross-attention, once per sentence) and
    `decoder.step` serve the search.

    Args:
        source_vocab_size: Source vocabulary size.
        target_vocab_size: Target vocabulary size.
        hidden_dim: Width `d` of both stacks.
        encoder_layers: Encoder layers (the paper: 6).
        decoder_layers: Decoder layers (the paper: 5).
        num_heads: Attention heads.
        ffn_dim: Inner width of the feed-forward nets.
        ffn_layers: Linear maps of each feed-forward net `ffn^n` (0: none).
        groups: Channel groups of each box's two separable convolutions: one number for
            both, or SliceNet's super-separable pair `"3.2"` (its separability -2).
        encoder_dilations: The encoder's dilation scheme (`"1.1.2.4"`; no dilation:
            `"1.1.1.1"`).
        decoder_dilations: The decoder's (the paper: none).
        encoder_timing: `"every_layer"` or `"input"`.
        decoder_timing: `"none"`, `"once"` or `"every_layer"`.
        cross_attention: `"before"` or `"after"` the decoder's boxes.
        decoder_self_attention: Masked self-attention in the decoder's layers.
        encoder_self_attention: Self-attention in the encoder's layers.
        dropout: Drop probability of embeddings and sub-layers.
        attention_dropout: Drop probability of the attention weights.
        share_all_embeddings: One token table for the source, the target and the output
            projection (SliceNet's; the vocabularies must be one, as a joint
            SentencePiece model's are); otherwise the source has its own.
        norm_placement: Where each sub-layer's layer norm sits: `"post"`, the paper's
            `norm(x + f(x))`, or `"pre"`, `x + f(norm(x))` (see `ResidualNorm`).
        max_source_positions: The longest source the model accepts.
        max_target_positions: The longest decoder input.
        pad_id: Padding token id.
        **kwargs: Standard `keras.Model` arguments.

    Example:

    >>> model = PoseNet(20, 20, hidden_dim=8, encoder_layers=1, decoder_layers=1,
    ...                 num_heads=2, ffn_dim=16)
    >>> model(model.dummy_inputs()).shape
    TensorShape([1, 1, 20])
    """

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        hidden_dim: int = 256,
        encoder_layers: int = 6,
        decoder_layers: int = 5,
        num_heads: int = 8,
        ffn_dim: int = 1024,
        ffn_layers: int = 2,
        groups: int | str = 1,
        encoder_dilations: str = "1.1.2.4",
        decoder_dilations: str = "1.1.1.1",
        encoder_timing: str = "every_layer",
        decoder_timing: str = "once",
        cross_attention: str = "before",
        decoder_self_attention: bool = True,
        encoder_self_attention: bool = False,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        norm_placement: str = "post",
        share_all_embeddings: bool = False,
        max_source_positions: int = 1024,
        max_target_positions: int = 1024,
        pad_id: int = PAD_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        _check_widths(hidden_dim, num_heads, groups)
        if share_all_embeddings and int(source_vocab_size) != int(target_vocab_size):
            raise ValueError(
                "share_all_embeddings needs one vocabulary for both sides, got "
                f"source_vocab_size={source_vocab_size} and "
                f"target_vocab_size={target_vocab_size}."
            )
        table = (
            token_embedding(int(target_vocab_size), hidden_dim) if share_all_embeddings else None
        )
        shared: dict[str, Any] = dict(
            hidden_dim=hidden_dim,
            groups=groups,
            ffn_dim=ffn_dim,
            ffn_layers=ffn_layers,
            num_heads=num_heads,
            dropout=dropout,
            attention_dropout=attention_dropout,
            norm_placement=norm_placement,
            pad_id=pad_id,
        )
        self.encoder = PoseNetEncoder(
            source_vocab_size,
            num_layers=encoder_layers,
            dilation_scheme=encoder_dilations,
            self_attention=encoder_self_attention,
            timing=encoder_timing,
            max_positions=max_source_positions,
            shared_embedding=table,
            name="encoder",
            **shared,
        )
        self.decoder = PoseNetDecoder(
            target_vocab_size,
            num_layers=decoder_layers,
            dilation_scheme=decoder_dilations,
            self_attention=decoder_self_attention,
            cross_attention=cross_attention,
            timing=decoder_timing,
            max_positions=max_target_positions,
            shared_embedding=table,
            name="decoder",
            **shared,
        )
        self._config = {
            "source_vocab_size": int(source_vocab_size),
            "target_vocab_size": int(target_vocab_size),
            "encoder_layers": int(encoder_layers),
            "decoder_layers": int(decoder_layers),
            "encoder_dilations": encoder_dilations,
            "decoder_dilations": decoder_dilations,
            "encoder_timing": encoder_timing,
            "decoder_timing": decoder_timing,
            "cross_attention": cross_attention,
            "decoder_self_attention": bool(decoder_self_attention),
            "encoder_self_attention": bool(encoder_self_attention),
            "max_source_positions": int(max_source_positions),
            "max_target_positions": int(max_target_positions),
            "share_all_embeddings": bool(share_all_embeddings),
            **{key: value for key, value in shared.items()},
        }

    def encode(
        self, source: tf.Tensor, training: bool = False, kernels: FoldedKernels | None = None
    ) -> PoseNetMemory:
        """Runs the encoder and projects its output for every decoder layer (`kernels`,
        the search's `FoldedKernels`, hold none of theirs: only the decoder's tied table
        is folded)."""
        return self.decoder.memory(self.encoder(source, training=training))

    def attention_maps(
        self, source: tf.Tensor, target_input: tf.Tensor
    ) -> list[tuple[str, tf.Tensor]]:
        """`(name, [B, T, S] weights)` of every layer's cross-attention ("layer_2",
        averaged over heads), teacher-forced on `target_input`."""
        encoder_output = self.encoder(source)
        _, per_layer = self.decoder.features(
            target_input, encoder_output, return_attention="per_layer"
        )
        return [(f"layer_{index}", weights) for index, weights in enumerate(per_layer)]


def _check_widths(hidden_dim: int, num_heads: int, groups: int | str) -> None:
    """Refuses widths the layers cannot split, when the model is configured rather than
    when it is first built."""
    if hidden_dim < 2 or hidden_dim % 2:
        raise ValueError(f"hidden_dim must be even (sines and cosines), got {hidden_dim}.")
    if num_heads < 1 or hidden_dim % num_heads:
        raise ValueError(f"hidden_dim={hidden_dim} does not split into num_heads={num_heads}.")
    if any(hidden_dim % count for count in parse_groups(groups)):
        raise ValueError(f"hidden_dim={hidden_dim} does not split into groups={groups}.")
