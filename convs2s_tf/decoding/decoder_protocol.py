"""What the search needs of a model: the step-by-step decoder contract.

Any model family whose model satisfies `SearchableModel` is searched, ensembled,
compiled into buckets and exported by the code of `convs2s_tf.decoding` and
`convs2s_tf.export` unchanged. The contract:

- `encode(source)` gives one encoder row per sentence (a nest of `[sentences, ...]`
  tensors); the search never repeats it per hypothesis, `step` reads row
  `hypothesis // beam_size`. `source_axes(encoder_output)` names each leaf's source
  axis, where a compiled search pads the source to its bucket's width.
- `decoder.initial_state(batch, positions)` gives the incremental state: a nest of
  tensors whose leaves are `[batch, ...]`; the search reorders them with one gather on
  the first axis per step. A decoder that keeps every position (self-attention) holds
  them in buffers with room for `positions` entries and names, per leaf, the axis that
  grows (`decoder.position_axes(state)`); the search grows those buffers before a step
  writes beyond them (`convs2s_tf.decoding.growing_state`), so a step costs what the
  positions decoded so far cost. A leaf that keeps only its last positions names its
  axis as a `convs2s_tf.models.limited_axis.LimitedAxis` (PoseNet's convolution windows:
  grown up to their length, then written as a ring). A decoder whose state is a fixed
  window (ConvS2S) ignores `positions` and names no axis; every other dimension stays
  fixed for the whole search (XLA compiles a bucket once).
- `decoder.step(tokens, step, state, encoder_output, beam_size, output_subset)` decodes
  one position for every hypothesis, reading only the state (never earlier positions
  again), writes position `step` into its buffers (the search has grown them to hold
  it) and returns `(logits, attention, state)`, its leaves of unchanged shapes.
- `decoder.select_outputs(ids, valid)` (for shortlists) returns an `output_subset` that
  makes `step` score only those target ids' columns
  (`convs2s_tf.models.output_subset.OutputSubset` for the shipped families).
- A model with layers to fold for inference (`folds_kernel`, see
  `convs2s_tf.layers.folded_kernels`) also takes `kernels=`, the `FoldedKernels` the
  search made once (`make_inference_model`), in `encode`, `decoder.step` and
  `decoder.select_outputs`, and computes with them; a model with none is never passed
  it.
- A decoder whose step reads many small weights may offer `read_step_weights()`: its
  step's weights read (and cast) into a nest of tensors, which the inference model reads
  once where the search is traced and passes to every `decoder.step` as
  `step_weights=`, so the search's loop reads no variable (PoseNet's step: about
  200 variable reads a step otherwise). A decoder without it is never passed it.

`tests/helpers/decoder_contract.py` checks a family against this contract: stepping
equals the parallel pass at every position, whether the state grows a position a step
or by several at once, and reordering the state reorders the hypotheses.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import tensorflow as tf


@runtime_checkable
class IncrementalDecoder(Protocol):
    """A decoder that the beam search steps one position at a time.

    Attributes:
        vocab_size: the target vocabulary (columns of the logits).
        pad_id: the padding id.
        max_length: the most positions the decoder can take (its position table).
    """

    vocab_size: int
    pad_id: int
    max_length: int

    def initial_state(self, batch_size: int | tf.Tensor, positions: int | tf.Tensor = 0) -> Any:
        """Returns the state before the first step: a nest of `[batch_size, ...]` tensors
        with room for `positions` positions where a leaf keeps every position."""

    def position_axes(self, incremental_state: Any) -> Any:
        """Returns, for each leaf of `incremental_state` (a nest of its structure), the
        axis holding one entry a decoded position (a `LimitedAxis` where the leaf keeps
        only its last positions), or None for a leaf of fixed shape."""

    def step(
        self,
        tokens: tf.Tensor,
        step: int | tf.Tensor,
        incremental_state: Any,
        encoder_output: Any,
        beam_size: int = 1,
        output_subset: Any = None,
    ) -> tuple[tf.Tensor, tf.Tensor, Any]:
        """Decodes position `step` for every hypothesis.

        Args:
            tokens: `[batch]` int, each hypothesis' previous token (`</s>` at step 0).
            step: scalar int, the 0-based position of `tokens`.
            incremental_state: `initial_state`'s nest, or the previous step's.
            encoder_output: `encode`'s nest, one row per `beam_size` hypotheses.
            beam_size: hypotheses per sentence.
            output_subset: None (the whole vocabulary) or `select_outputs`' result.

        Returns:
            `(logits, attention, incremental_state)`: float32 `[batch, columns]`, float32
            `[batch, source]` (zeros for a decoder without attention) and the new state,
            of the same structure and shapes.
        """


@runtime_checkable
class ShortlistDecoder(IncrementalDecoder, Protocol):
    """An `IncrementalDecoder` that can score a subset of the target vocabulary."""

    def select_outputs(self, ids: tf.Tensor, valid: tf.Tensor) -> Any:
        """Returns the `output_subset` of target `ids` (`[columns]`, `valid` marking the
        real ones) for `step`."""


@runtime_checkable
class SourceEncoder(Protocol):
    """What the search reads of an encoder: its vocabulary and its longest input."""

    vocab_size: int
    max_length: int


@runtime_checkable
class SearchableModel(Protocol):
    """A model the search, ensembles and exports can decode."""

    encoder: SourceEncoder
    decoder: IncrementalDecoder

    def encode(self, source: tf.Tensor, training: bool = False) -> Any:
        """Returns the encoder output of `[sentences, source]` ids: one row a sentence."""

    def source_axes(self, encoder_output: Any) -> Any:
        """Returns, for each leaf of `encoder_output` (a nest of its structure), the axis
        holding one entry a source position."""
