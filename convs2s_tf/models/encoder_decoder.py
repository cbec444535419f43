"""What every family's Keras model shares: an encoder, a decoder and its config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.vocabulary import EOS_ID


class EncoderDecoderModel(keras.Model):
    """Base of the families' models: teacher forcing, the loss's two entry points, the
    config round trip and the building batch, over the `encoder` and `decoder` layers
    and the `_config` dict (the constructor's arguments) that a subclass's constructor
    sets. A subclass adds `encode` (what the search's decoder steps read) and
    `attention_maps` (`TranslationModel` in `convs2s_tf.models.families`).

    Calling the model runs teacher forcing over all target positions at once:
    `model({"source": [B, S], "target_input": [B, T]})` returns float32 logits
    `[B, T, target_vocab_size]`.

    Args:
        **kwargs: Standard `keras.Model` arguments.

    Example:

    >>> from convs2s_tf.models import ConvS2S
    >>> model = ConvS2S.from_preset("iwslt_de_en", source_vocab_size=100,
    ...                             target_vocab_size=120)
    >>> isinstance(model, EncoderDecoderModel)
    True
    """

    encoder: keras.layers.Layer
    decoder: keras.layers.Layer
    _config: dict[str, Any]

    def build(self, input_shape: Any = None) -> None:
        self.encoder.build()
        self.decoder.build()
        self.built = True

    def call(
        self,
        inputs: Mapping[str, tf.Tensor],
        training: bool = False,
        return_attention: bool | str = False,
    ) -> Any:
        encoder_output = self.encoder(inputs["source"], training=training)
        return self.decoder(
            inputs["target_input"],
            encoder_output,
            training=training,
            return_attention=return_attention,
        )

    def output_features(self, inputs: Mapping[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        """The inputs of the vocabulary projection, `[B, T, width]`: a loss projects only
        the rows of real tokens (`unbiased_output_logits`)."""
        encoder_output = self.encoder(inputs["source"], training=training)
        return self.decoder.features(inputs["target_input"], encoder_output, training=training)

    def unbiased_output_logits(self, features: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """`(logits, bias)` of `[tokens, width]` features: the product in the compute dtype
        and the float32 output bias still to be added."""
        return self.decoder.unbiased_output_logits(features)

    def source_axes(self, encoder_output: Any) -> Any:
        """Each leaf's source axis in `encode`'s output (`SearchableModel`): the second,
        `[sentences, source, ...]`, unless the family's output says otherwise."""
        if hasattr(encoder_output, "source_axes"):
            return encoder_output.source_axes()
        return tf.nest.map_structure(lambda _: 1, encoder_output)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(self._config)
        return config

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Any:
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
        return cls(**config)

    def dummy_inputs(self) -> dict[str, tf.Tensor]:
        """A one-token batch, e.g. to build every variable before restoring a checkpoint."""
        return {"source": tf.constant([[EOS_ID]]), "target_input": tf.constant([[EOS_ID]])}
