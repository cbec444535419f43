"""Ensembles of ConvS2S models searched as one, as fairseq's `EnsembleModel`.

An `Ensemble` offers the interface `beam_search` reads of a `ConvS2S` (`encode`,
`encoder.max_length`, `decoder.initial_state`, `decoder.step`, ...), so the search, the
`TranslationModule` and every export run unchanged over it:

* `encode` returns one `EncoderOutput` per member, and the incremental state is one
  member state per member: each member keeps its own encoder output and cached
  convolution windows, reordered with the beams like any other nested state;
* each step's distributions are combined as fairseq combines them, the log of the mean
  probability, `logsumexp_m(log_softmax(logits_m)) - log M`; these already normalised
  log-probabilities are returned as the step's "logits" (the search's own log-sum-exp of
  them is then ~0);
* attention is the mean of the members' attention.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import keras
import tensorflow as tf

if TYPE_CHECKING:
    from convs2s_tf.layers import FoldedKernels
    from convs2s_tf.models import ConvS2S
    from convs2s_tf.models.convs2s.encoder_output import EncoderOutput

__all__ = ["Ensemble", "combine_log_probs"]


def combine_log_probs(member_logits: Sequence[tf.Tensor]) -> tf.Tensor:
    """The log of the members' mean probability: `logsumexp_m(log_softmax(l_m)) - log M`.

    Args:
        member_logits: A list of `M` `[rows, vocabulary]` float32 logits.

    Returns:
        `[rows, vocabulary]` float32 log-probabilities. A single member's logits are
        returned as they are (fairseq too skips the averaging then), so a one-member
        ensemble searches bit for bit as its model does.
    """
    if len(member_logits) == 1:
        return member_logits[0]
    log_probs = tf.stack([tf.nn.log_softmax(logits, axis=-1) for logits in member_logits])
    return tf.reduce_logsumexp(log_probs, axis=0) - math.log(len(member_logits))


class _EnsembleEncoder:
    """What the search and the export read of an encoder: its vocabulary and positions."""

    def __init__(self, members: Sequence[ConvS2S]) -> None:
        self.vocab_size = members[0].encoder.vocab_size
        # Sources are truncated to what every member can encode.
        self.max_length = min(member.encoder.max_length for member in members)


class _EnsembleDecoder:
    """The decoder interface of `beam_search` over every member's decoder."""

    def __init__(self, members: Sequence[ConvS2S]) -> None:
        self._decoders = [member.decoder for member in members]
        first = self._decoders[0]
        self.vocab_size = first.vocab_size
        self.pad_id = first.pad_id
        self.max_length = min(decoder.max_length for decoder in self._decoders)

    def initial_state(self, batch_size: int | tf.Tensor, positions: int | tf.Tensor = 0) -> tuple:
        """A tuple of the members' initial incremental states."""
        return tuple(decoder.initial_state(batch_size, positions) for decoder in self._decoders)

    def position_axes(self, incremental_state: Sequence[Any]) -> tuple[Any, ...]:
        """A tuple of the members' position axes of their states."""
        return tuple(
            decoder.position_axes(state)
            for decoder, state in zip(self._decoders, incremental_state)
        )

    def select_outputs(
        self, ids: tf.Tensor, valid: tf.Tensor, kernels: FoldedKernels | None = None
    ) -> tuple[Any, ...]:
        """A tuple of the members' `OutputSubset`s of target `ids` (a shortlist)."""
        return tuple(
            decoder.select_outputs(ids, valid, kernels=kernels) for decoder in self._decoders
        )

    def read_step_weights(self) -> tuple[Any, ...]:
        """Each member decoder's `read_step_weights()`, None for a member without."""
        return tuple(
            decoder.read_step_weights() if hasattr(decoder, "read_step_weights") else None
            for decoder in self._decoders
        )

    def step(
        self,
        tokens: tf.Tensor,
        step: int | tf.Tensor,
        incremental_state: Sequence[Any],
        encoder_output: Sequence[Any],
        beam_size: int = 1,
        output_subset: Sequence[Any] | None = None,
        kernels: FoldedKernels | None = None,
        step_weights: Sequence[Any] | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor, tuple[Any, ...]]:
        """One position for every hypothesis from every member.

        Args:
            tokens: `[batch]` int, each hypothesis' previous token.
            step: Scalar int, the 0-based position of `tokens`.
            incremental_state: The tuple of member states (`initial_state` or the last
                step's).
            encoder_output: The tuple of member `EncoderOutput`s (`Ensemble.encode`).
            beam_size: Hypotheses per sentence.
            output_subset: The tuple from `select_outputs`, or None (whole vocabulary).
            kernels: Optional `FoldedKernels` of the members' layers.
            step_weights: Optional `read_step_weights()` of the members.

        Returns:
            `(log_probs, attention, incremental_state)`: the combined `[batch, vocab]`
            log-probabilities (`combine_log_probs`), the members' mean `[batch, source]`
            attention and the tuple of updated member states.
        """
        logits, attention, states = [], [], []
        subsets = output_subset or (None,) * len(self._decoders)
        member_weights = step_weights or (None,) * len(self._decoders)
        for decoder, state, encoded, subset, weights in zip(
            self._decoders, incremental_state, encoder_output, subsets, member_weights
        ):
            read_once = {} if weights is None else {"step_weights": weights}
            member_logits, member_attention, state = decoder.step(
                tokens,
                step,
                state,
                encoded,
                beam_size=beam_size,
                output_subset=subset,
                kernels=kernels,
                **read_once,
            )
            logits.append(member_logits)
            attention.append(member_attention)
            states.append(state)
        mean_attention = tf.add_n(attention) / float(len(attention))
        return combine_log_probs(logits), mean_attention, tuple(states)


class Ensemble(keras.layers.Layer):
    """Built `ConvS2S` models sharing their vocabularies, searched as one model.

    `beam_search(Ensemble([a, b]), source)` translates as fairseq's `--path a.pt:b.pt`
    does. The members' variables are the ensemble's (a SavedModel of it holds them all),
    and `make_inference_model(ensemble)` folds every member's kernels.

    Args:
        members: One or more built `ConvS2S` models with the same source and target
            vocabulary sizes and padding id (whether their vocabularies are the same
            files is the loader's check).

    Raises:
        ValueError: No member, or members of different vocabulary sizes.

    Example:

    >>> from convs2s_tf.decoding import SearchConfig, beam_search
    >>> from convs2s_tf.models import ConvS2S
    >>> def small():
    ...     model = ConvS2S(20, 20, embed_dim=8, encoder_layers="[(8, 3)]",
    ...                     decoder_layers="[(8, 3)]", decoder_out_embed_dim=8)
    ...     model.build()
    ...     return model
    >>> ensemble = Ensemble([small(), small()])
    >>> output = beam_search(ensemble, tf.constant([[5, 6, 2]]), SearchConfig(beam_size=2))
    >>> output.tokens.shape[:2]
    TensorShape([1, 1])
    """

    def __init__(self, members: Iterable[ConvS2S], **kwargs: Any) -> None:
        kwargs.setdefault("name", "ensemble")
        super().__init__(**kwargs)
        members = list(members)
        if not members:
            raise ValueError("An ensemble needs at least one model.")
        first = _vocabulary_sizes(members[0])
        for index, member in enumerate(members[1:], start=1):
            if _vocabulary_sizes(member) != first:
                raise ValueError(
                    f"Ensemble member {index} has (source, target) vocabulary sizes and pad "
                    f"id {_vocabulary_sizes(member)}, member 0 {first}: they must share "
                    "their vocabularies."
                )
        self.members = members
        self.built = True

    @property
    def encoder(self) -> _EnsembleEncoder:
        """The members' common encoder facts (`vocab_size`, `max_length`)."""
        return _EnsembleEncoder(self.members)

    @property
    def decoder(self) -> _EnsembleDecoder:
        """The decoder interface `beam_search` steps (see `_EnsembleDecoder.step`)."""
        return _EnsembleDecoder(self.members)

    def encode(
        self, source: tf.Tensor, training: bool = False, kernels: FoldedKernels | None = None
    ) -> tuple[EncoderOutput, ...]:
        """A tuple of every member's `EncoderOutput` of `source` (with `kernels`, the
        members' `FoldedKernels`, if given)."""
        return tuple(
            member.encode(source, training=training, kernels=kernels) for member in self.members
        )

    def source_axes(self, encoder_output: Sequence[Any]) -> tuple[Any, ...]:
        """A tuple of the members' source axes of their encoder outputs."""
        return tuple(
            member.source_axes(output) for member, output in zip(self.members, encoder_output)
        )


def _vocabulary_sizes(model: ConvS2S) -> tuple[int, int, int]:
    return (model.encoder.vocab_size, model.decoder.vocab_size, model.decoder.pad_id)
