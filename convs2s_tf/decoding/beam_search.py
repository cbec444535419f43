"""Incremental beam search for ConvS2S in core TensorFlow ops.

The search follows the authors' implementation (fairseq's `SequenceGenerator`), so that
imported checkpoints give the same hypotheses:

* log-probabilities are a float32 log-softmax of the logits; `<pad>` is never chosen,
  `<unk>` loses `unk_penalty`, `</s>` is forbidden before `min_length` tokens and is
  the only choice once a sentence reaches its maximum length (`candidates`);
* at the first step only one copy of each sentence's beam is expanded;
* each step ranks `2 * beam` candidates per sentence by cumulative log-probability;
  candidates ending in `</s>` that rank within the first `beam` are finished, with
  score `cumulative / length ** alpha` (`length` counting `</s>`), and the first `beam`
  candidates not ending in `</s>` continue (`selection`);
* a sentence is done once it holds `beam` finished hypotheses; the loop exits early
  once every sentence is done.

The loop's variables are one `BeamState`; a step (`search_step`) feeds one new position
per hypothesis and reorders the cached convolution windows by the surviving beams;
nothing earlier is recomputed. The maximum output length `a * source_length + b` is
computed per sentence, so a sentence's result does not depend on the other sentences in
its batch.

What keeps a step cheap: weight-normalised kernels are computed once per search
(`make_inference_model`), not once per step; the encoder output is kept once per sentence
(attention runs on the hypotheses grouped by sentence) instead of once per hypothesis;
sentences are dropped from the batch as soon as they are done, as in the authors'
implementation, so later steps only pay for the sentences still being searched; and
the log-softmax is never materialised over the vocabulary (candidates come from the
raw logits, and only they are normalised by the log-sum-exp).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import tensorflow as tf

from convs2s_tf.decoding.beam_state import (
    BeamState,
    FinishedHypotheses,
    SearchOutput,
    initial_beam_state,
    shape_invariants,
)
from convs2s_tf.decoding.candidates import top_k_with_special_bias
from convs2s_tf.decoding.decoder_protocol import IncrementalDecoder
from convs2s_tf.decoding.growing_state import grow_state, grows, phase_width
from convs2s_tf.decoding.inference_model import InferenceModel, make_inference_model
from convs2s_tf.decoding.search_config import SearchConfig
from convs2s_tf.decoding.search_parts import search_in_parts
from convs2s_tf.decoding.search_step import (
    drop_finished_sentences,
    record_attention,
    search_step_function,
)
from convs2s_tf.decoding.step_constants import OutputVocabulary, StepConstants, output_vocabulary
from convs2s_tf.layers.folded_kernels import KernelValue
from convs2s_tf.vocabulary import PAD_ID

if TYPE_CHECKING:
    from convs2s_tf.decoding.ensemble import Ensemble
    from convs2s_tf.models import ConvS2S
    from convs2s_tf.shortlist.shortlist import ShortlistTable

__all__ = [
    "MIN_LENGTH_ERROR",
    "SearchOutput",
    "XLA_SOURCE_MULTIPLE",
    "beam_search",
    "best_hypothesis_function",
    "max_output_lengths",
    "n_best",
    "top_k_with_special_bias",
]


# First words of the error a search raises when `min_length` exceeds a sentence's
# maximum output length (callers turn it into a message naming the flags).
MIN_LENGTH_ERROR = "min_length exceeds the maximum output length of a sentence:"


def max_output_lengths(
    source: tf.Tensor,
    max_len_a: float,
    max_len_b: int,
    limit: int | tf.Tensor,
    pad_id: int = PAD_ID,
) -> tf.Tensor:
    """Per sentence `min(int(a * source_length + b), limit)`, `source_length` counting `</s>`."""
    source_length = tf.reduce_sum(tf.cast(tf.not_equal(source, pad_id), tf.float32), axis=1)
    lengths = tf.cast(max_len_a * source_length + max_len_b, tf.int32)
    return tf.minimum(lengths, limit)


def round_up(length: int | tf.Tensor, multiple: int) -> int | tf.Tensor:
    """`length` rounded up to a multiple of `multiple`."""
    return (length + multiple - 1) // multiple * multiple


def _pad_columns(tensor: tf.Tensor, multiple: int, value: int) -> tf.Tensor:
    """Right-pads `[batch, length]` to a multiple of `multiple` columns."""
    length = tf.shape(tensor)[1]
    return tf.pad(tensor, [[0, 0], [0, round_up(length, multiple) - length]], constant_values=value)


# With the decoder step XLA-compiled, sources (and token histories) are padded to a
# multiple of this many tokens so that a handful of compiled shapes serve all lengths
# (padding is masked).
XLA_SOURCE_MULTIPLE = 16


def beam_search(
    model: ConvS2S | Ensemble | InferenceModel,
    source: tf.Tensor,
    search_config: SearchConfig | None = None,
    *,
    return_attention: bool = False,
    kernels: Sequence[KernelValue] | None = None,
    shortlist: ShortlistTable | None = None,
) -> SearchOutput:
    """Translates `source` with beam search (greedy when `search_config.beam_size == 1`).

    Args:
        model: An `InferenceModel` (`make_inference_model`), or a `ConvS2S` or
            `Ensemble`, whose kernels are then folded here, once for the search.
        source: `[batch, source]` int32 token ids ending in `</s>`, padded with `<pad>`.
        search_config: The `SearchConfig` (default: its defaults): beam size, `nbest`,
            length limits (a maximum output length `max_len_a * source_length +
            max_len_b`, never beyond what the position table allows), penalties and `xla`.
            Its `dtype` is the model's own. With `xla` the decoder step is XLA-compiled
            (the search bookkeeping stays in graph mode: XLA on the whole loop is far
            slower on CPU); the step then keeps static shapes: finished sentences
            stay in the batch and the source is padded to a multiple of
            `XLA_SOURCE_MULTIPLE`, so it compiles once per batch size and source bucket
            rather than at every step. With `parts > 1` (and no shortlist) the batch's
            rows are searched as that many searches side by side (`search_in_parts`).
        return_attention: Also return each hypothesis' attention.
        kernels: The model's folded kernels (`fold_kernels`, or `Int8Kernel`s of them)
            when the caller keeps them, for a model that is not an `InferenceModel`
            (otherwise they are computed once per call).
        shortlist: A `ShortlistTable`: the batch is decoded against its candidate set
            (the log-softmax normalises over that set); None: the whole vocabulary.

    Returns:
        A `SearchOutput` of `search_config.nbest` hypotheses per sentence.

    Example:

    >>> from convs2s_tf.models import ConvS2S
    >>> model = ConvS2S(20, 20, embed_dim=8, encoder_layers="[(8, 3)]",
    ...                 decoder_layers="[(8, 3)]", decoder_out_embed_dim=8)
    >>> model.build()
    >>> config = SearchConfig(beam_size=3, nbest=2, max_len_b=4)
    >>> beam_search(model, tf.constant([[5, 6, 2]]), config).tokens.shape[:2]
    TensorShape([1, 2])
    """
    config = SearchConfig() if search_config is None else search_config
    # Folded once for the whole search (all its parts), outside the loop.
    model = make_inference_model(model, kernels)
    if config.parts > 1 and shortlist is None:
        whole = config.replace(parts=1)
        return search_in_parts(
            lambda rows: beam_search(model, rows, whole, return_attention=return_attention),
            tf.convert_to_tensor(source, tf.int32),
            config.parts,
        )
    beam_size, nbest, xla = config.beam_size, config.nbest, config.xla
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"`nbest` must be between 1 and `beam_size={beam_size}`, got {nbest}.")
    constants = StepConstants(
        beam_size=beam_size,
        vocab_size=model.decoder.vocab_size,
        min_length=config.min_length,
        length_penalty=config.length_penalty,
        unk_penalty=config.unk_penalty,
        return_attention=return_attention,
        xla=xla,
    )
    source = tf.convert_to_tensor(source, tf.int32)
    max_lengths = checked_max_lengths(
        model.decoder, source, config.max_len_a, config.max_len_b, config.min_length
    )
    # Steps 0..max_length: the last may only end a hypothesis.
    max_steps = tf.reduce_max(max_lengths) + 1
    state = _initial_state(model, constants, source, max_lengths, max_steps)
    # A compiled step compiles once per number of columns: rounded to few shapes.
    vocabulary = output_vocabulary(
        model.decoder, shortlist, source, constants, multiple=256 if xla else None
    )
    state = search_loop(model.decoder, constants, state, max_steps, vocabulary=vocabulary)
    return n_best(state, nbest, tf.shape(source)[1], return_attention)


def checked_max_lengths(
    decoder: IncrementalDecoder,
    source: tf.Tensor,
    max_len_a: float,
    max_len_b: int,
    min_length: int,
) -> tf.Tensor:
    """`max_output_lengths` within the decoder's positions, asserted `>= min_length`
    (in graph mode: XLA drops assertions)."""
    # Step t feeds position t of the decoder input, whose last usable index is
    # max_length - 1; the last step may only produce </s>.
    limit = decoder.max_length - 1
    max_lengths = max_output_lengths(source, max_len_a, max_len_b, limit, decoder.pad_id)
    # fairseq refuses min_len > max_len too; here per sentence, naming both.
    check = tf.debugging.Assert(
        tf.reduce_all(min_length <= max_lengths),
        [MIN_LENGTH_ERROR, min_length, "maximum output lengths:", max_lengths],
        summarize=8,
    )
    with tf.control_dependencies([check]):
        return tf.identity(max_lengths)


def _initial_state(
    model: InferenceModel,
    constants: StepConstants,
    source: tf.Tensor,
    max_lengths: tf.Tensor,
    max_steps: tf.Tensor,
) -> BeamState:
    """The `BeamState` before the first step: the source encoded, the caches empty."""
    # Finished histories are buffers of a fixed width (step t writes column t); a
    # compiled step's fixed shapes make the continuing ones so too, otherwise they grow.
    history_width = max_steps
    if constants.xla:
        source = _pad_columns(source, XLA_SOURCE_MULTIPLE, model.decoder.pad_id)
        history_width = round_up(max_steps, XLA_SOURCE_MULTIPLE)
    return initial_beam_state(
        constants.beam_size,
        encoder_output=model.encode(source, training=False),
        max_lengths=max_lengths,
        # Empty: the search grows what it needs (`search_loop`).
        cache=model.decoder.initial_state(tf.shape(source)[0] * constants.beam_size),
        width=history_width,
        source_length=tf.shape(source)[1],
        growing=constants.drop_finished,
    )


def search_loop(
    decoder: IncrementalDecoder,
    constants: StepConstants,
    state: BeamState,
    max_steps: int | tf.Tensor,
    compile_step: bool | None = None,
    vocabulary: OutputVocabulary | None = None,
    grow: bool | None = None,
) -> BeamState:
    """Steps from `state` until every sentence is done or `max_steps` steps are taken.

    A decoder state that grows (`growing_state`) grows before each step: by a column in
    graph mode, to the next fixed phase width when each step is compiled. A compiled
    loop (`compile_step=False`) never grows it: its caller sizes it.

    Args:
        decoder: The model's decoder.
        constants: The search's `StepConstants`.
        state: The `BeamState` before the first step.
        max_steps: Scalar int32, the most steps taken.
        compile_step: XLA-compile each step on its own (default `constants.xla`); False
            when the whole loop is compiled.
        vocabulary: The `OutputVocabulary` of a shortlist, or None.
        grow: Whether a growing state grows (default: unless `compile_step` is False);
            True with `compile_step=False`: a column a step in a graph-mode loop of
            fixed-shape steps (a compiled loop's state, searched on).

    Returns:
        The `BeamState` after the last step.
    """
    step = search_step_function(decoder, constants, compile_step, vocabulary)
    compiled = constants.xla if compile_step is None else compile_step
    # (A compiled loop's caller sizes the state.)
    growing = (compile_step is not False if grow is None else grow) and grows(decoder, state.cache)

    def room(state: BeamState) -> tf.Tensor:
        if not compiled:
            return state.step + 1
        history_width = tf.shape(state.finished.tokens)[2]
        return phase_width(state.step, history_width, decoder.max_length)

    def body(state: BeamState) -> BeamState:
        if growing:
            state = state._replace(cache=grow_state(decoder, state.cache, room(state)))
        state, selection, attention = step(state)
        if constants.return_attention:
            state = record_attention(constants, state, selection, attention)
        if constants.drop_finished:
            state = drop_finished_sentences(constants, state, selection)
        return state

    return step_until_done(decoder, constants, state, max_steps, body, growing)


def step_until_done(
    decoder: IncrementalDecoder,
    constants: StepConstants,
    state: BeamState,
    max_steps: int | tf.Tensor,
    body: Callable[[BeamState], BeamState],
    growing: bool = False,
) -> BeamState:
    """Applies `body` (`BeamState` -> `BeamState` of the same step; the step counter is
    advanced here) from `state` until every sentence holds `beam_size` finished
    hypotheses or `max_steps` steps are taken: the stopping rule of every search
    (`decoder`: whose state `state.cache` is; `growing`: whether `body` grows it)."""

    def searching(state: BeamState) -> tf.Tensor:
        return tf.logical_and(
            state.step < max_steps, tf.reduce_any(state.finished_count < constants.beam_size)
        )

    (state,) = tf.while_loop(
        searching,
        lambda state: (body(state)._replace(step=state.step + 1),),
        (state,),
        shape_invariants=(shape_invariants(constants, state, decoder, growing),),
        maximum_iterations=decoder.max_length,
    )
    return state


def n_best(
    state: BeamState,
    nbest: int,
    source_length: int | tf.Tensor,
    return_attention: bool = False,
) -> SearchOutput:
    """The `nbest` best finished hypotheses of every sentence of a final `BeamState`.

    Args:
        state: The `BeamState` after the last step.
        nbest: Hypotheses per sentence.
        source_length: Source positions to keep of the attention (without the padding a
            compiled step added).
        return_attention: Whether the state kept attention histories to return.

    Returns:
        A `SearchOutput`, its columns trimmed to the longest kept hypothesis.
    """
    attention = state.finished_attention if return_attention else None
    return n_best_of(state.finished, nbest, attention, source_length)


def n_best_of(
    finished: FinishedHypotheses,
    nbest: int,
    finished_attention: tf.Tensor | None = None,
    source_length: int | tf.Tensor | None = None,
) -> SearchOutput:
    """The `nbest` best of `FinishedHypotheses` (and their attention, if given).

    Returns:
        A `SearchOutput`, its columns trimmed to the longest kept hypothesis and the
        attention's source positions to `source_length`.
    """
    scores, order = tf.math.top_k(finished.scores, k=nbest)
    tokens = tf.gather(finished.tokens, order, batch_dims=1)
    lengths = tf.gather(finished.lengths, order, batch_dims=1)
    # Trim columns no kept hypothesis uses.
    width = tf.maximum(tf.reduce_max(lengths), 1)
    attention = None
    if finished_attention is not None:
        attention = tf.gather(finished_attention, order, batch_dims=1)[:, :, :width]
        attention = attention[:, :, :, :source_length]
    return SearchOutput(
        tokens=tokens[:, :, :width], scores=scores, lengths=lengths, attention=attention
    )


def best_hypothesis_function(
    model: ConvS2S | Ensemble, search_config: SearchConfig
) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """A `tf.function` from `[batch, source]` ids to the best hypothesis of each sentence.

    One trace serves every batch and source shape (validation translation); the search
    is `search_config`'s with `nbest` 1.

    Returns:
        `search(source) -> (tokens, lengths)`, `[batch, time]` int32 ending in `</s>`
        then `<pad>`, and `[batch]` int32.
    """

    best_only = search_config.replace(nbest=1)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
    def search(source: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        output = beam_search(model, source, best_only)
        return output.tokens[:, 0], output.lengths[:, 0]

    return search
