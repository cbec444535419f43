"""The ConvS2S encoder-decoder as a subclassed Keras model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers.folded_kernels import FoldedKernels
from convs2s_tf.models.convs2s.conv_decoder import ConvDecoder
from convs2s_tf.models.convs2s.conv_encoder import ConvEncoder
from convs2s_tf.models.convs2s.encoder_output import EncoderOutput
from convs2s_tf.models.convs2s.layer_spec import normalise_layer_spec, parse_attention_spec
from convs2s_tf.models.encoder_decoder import EncoderDecoderModel
from convs2s_tf.vocabulary import EOS_ID, PAD_ID


@keras.saving.register_keras_serializable(package="convs2s_tf")
class ConvS2S(EncoderDecoderModel):
    """Convolutional Sequence to Sequence model (Gehring et al., 2017).

    Calling the model runs teacher forcing over all target positions at once:
    `model({"source": [B, S], "target_input": [B, T]})` returns float32 logits
    `[B, T, target_vocab_size]`. `encode` and `decoder.step` serve generation.

    Args:
        source_vocab_size: Source vocabulary size.
        target_vocab_size: Target vocabulary size.
        embed_dim: Embedding width `f` of encoder and decoder.
        encoder_layers: Encoder layer spec (text or list of tuples).
        decoder_layers: Decoder layer spec.
        decoder_out_embed_dim: Width `f_out` before the vocabulary projection.
        decoder_attention: Which decoder blocks attend: True, False, a list of booleans
            or its text.
        dropout: Drop probability `p` (paper: 0.1 to 0.2).
        max_source_positions: Rows of the source position table.
        max_target_positions: Rows of the target position table.
        share_decoder_input_output_embed: Tie the decoder's output projection to its
            token table.
        source_positions: Whether the encoder adds position embeddings.
        target_positions: Whether the decoder adds position embeddings.
        pad_id: Padding token id.
        **kwargs: Standard `keras.Model` arguments.

    Example:

    >>> model = ConvS2S.from_preset("iwslt_de_en", source_vocab_size=100,
    ...                             target_vocab_size=120)
    >>> logits = model({"source": tf.constant([[5, 6, 2]]),
    ...                 "target_input": tf.constant([[2, 7]])})
    >>> logits.shape
    TensorShape([1, 2, 120])
    """

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        embed_dim: int = 256,
        encoder_layers: str | Sequence[Sequence[int]] = "[(256, 3)] * 4",
        decoder_layers: str | Sequence[Sequence[int]] = "[(256, 3)] * 3",
        decoder_out_embed_dim: int = 256,
        decoder_attention: bool | str | Sequence[bool] = True,
        dropout: float = 0.1,
        max_source_positions: int = 1024,
        max_target_positions: int = 1024,
        share_decoder_input_output_embed: bool = False,
        source_positions: bool = True,
        target_positions: bool = True,
        pad_id: int = PAD_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        _check_sizes(
            dropout,
            pad_id,
            source_vocab_size=source_vocab_size,
            target_vocab_size=target_vocab_size,
            embed_dim=embed_dim,
            decoder_out_embed_dim=decoder_out_embed_dim,
        )
        decoder_layer_spec = normalise_layer_spec(decoder_layers)
        attention = parse_attention_spec(decoder_attention, len(decoder_layer_spec))
        self.decoder = ConvDecoder(
            vocab_size=target_vocab_size,
            embed_dim=embed_dim,
            layers=decoder_layer_spec,
            out_embed_dim=decoder_out_embed_dim,
            attention=attention,
            dropout=dropout,
            max_positions=max_target_positions,
            use_positions=target_positions,
            share_embeddings=share_decoder_input_output_embed,
            pad_id=pad_id,
            name="decoder",
        )
        self.encoder = ConvEncoder(
            vocab_size=source_vocab_size,
            embed_dim=embed_dim,
            layers=encoder_layers,
            dropout=dropout,
            max_positions=max_source_positions,
            use_positions=source_positions,
            num_attention_layers=sum(attention),
            pad_id=pad_id,
            name="encoder",
        )
        self._config = {
            "source_vocab_size": int(source_vocab_size),
            "target_vocab_size": int(target_vocab_size),
            "embed_dim": int(embed_dim),
            "encoder_layers": self.encoder.get_config()["layers"],
            "decoder_layers": self.decoder.get_config()["layers"],
            "decoder_out_embed_dim": int(decoder_out_embed_dim),
            "decoder_attention": list(attention),
            "dropout": float(dropout),
            "max_source_positions": int(max_source_positions),
            "max_target_positions": int(max_target_positions),
            "share_decoder_input_output_embed": bool(share_decoder_input_output_embed),
            "source_positions": bool(source_positions),
            "target_positions": bool(target_positions),
            "pad_id": int(pad_id),
        }

    @classmethod
    def from_preset(
        cls, preset: str, source_vocab_size: int, target_vocab_size: int, **overrides: Any
    ) -> ConvS2S:
        """Builds a model from a named architecture (see `convs2s_tf.models.convs2s.presets`)."""
        from convs2s_tf.models.convs2s.presets import get_preset

        config = dict(get_preset(preset))
        config.update(overrides)
        return cls(
            source_vocab_size=source_vocab_size, target_vocab_size=target_vocab_size, **config
        )

    def encode(
        self, source: tf.Tensor, training: bool = False, kernels: FoldedKernels | None = None
    ) -> EncoderOutput:
        """Runs the encoder: `source` `[B, S]` int -> `EncoderOutput` (with the
        `FoldedKernels` `kernels`, if given: inference)."""
        return self.encoder(source, training=training, kernels=kernels)

    def attention_maps(
        self, source: tf.Tensor, target_input: tf.Tensor, kernels: FoldedKernels | None = None
    ) -> list[tuple[str, tf.Tensor]]:
        """`(name, [B, T, S] weights)` of every attention block ("block_3"), teacher-forced
        on `target_input` (e.g. for TensorBoard's attention images; with the folded
        `kernels`, if given, for an export's)."""
        encoded = self.encode(source, kernels=kernels)
        per_block = self.decoder.block_attention(target_input, encoded, kernels)
        blocks = [i for i, has in enumerate(self.decoder.attention_spec) if has]
        return [(f"block_{block}", weights) for block, weights in zip(blocks, per_block)]


def _check_sizes(dropout: float, pad_id: int, **sizes: int) -> None:
    """Raises `ValueError` for a dropout outside `[0, 1)`, a size that is not positive or
    vocabularies too small for the special tokens."""
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}.")
    for name, value in sizes.items():
        if int(value) <= 0:
            raise ValueError(f"{name} must be positive, got {value}.")
    source, target = sizes["source_vocab_size"], sizes["target_vocab_size"]
    if min(source, target) <= max(pad_id, EOS_ID):
        raise ValueError(
            "The vocabularies must hold the special tokens; got source_vocab_size="
            f"{source}, target_vocab_size={target}."
        )
