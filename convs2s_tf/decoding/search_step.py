"""One step of the beam search, from the decoder call to the next `BeamState`.

A step feeds one new position per hypothesis to the decoder, reusing the cached
convolution windows (nothing earlier is recomputed), takes each hypothesis' candidates
(`candidates`), selects the continuing and finished ones (`select`), records their token
histories, reorders the caches by the surviving beams and, unless the step is compiled,
drops the sentences that are done, so that later steps only pay for the others.
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from convs2s_tf.decoding.beam_state import BeamState, FinishedHypotheses
from convs2s_tf.decoding.candidates import candidates
from convs2s_tf.decoding.decoder_protocol import IncrementalDecoder
from convs2s_tf.decoding.selection import Selection, select
from convs2s_tf.decoding.step_constants import OutputVocabulary, StepConstants
from convs2s_tf.vocabulary import EOS_ID, PAD_ID

# The name scopes of a step's parts, which let a TensorFlow profile tell them apart.
DECODER_SCOPE = "decoder_step"
SELECTION_SCOPE = "selection"
REORDER_SCOPE = "reorder_cache"
BOOKKEEPING_SCOPE = "bookkeeping"


def record(
    selection: Selection, step: tf.Tensor, alive_tokens: tf.Tensor, finished: FinishedHypotheses
) -> tuple[tf.Tensor, FinishedHypotheses]:
    """The token histories after a step, in their fixed-width buffers (a compiled
    search's fixed shapes; `record_growing` is the graph path's).

    Filled finished slots get their beam's history and `</s>` at column `step`,
    continuing hypotheses theirs and their new token. Columns after a hypothesis' last
    token hold `<pad>`.

    Args:
        selection: The step's `Selection`.
        step: Scalar int32, the tokens each hypothesis held before the step.
        alive_tokens: `[sentences, k, width]` int32 continuing hypotheses' tokens up to
            column `step - 1`.
        finished: `FinishedHypotheses` of the same sentences.

    Returns:
        `(alive_tokens, finished)` after the step.
    """
    column = tf.range(tf.shape(alive_tokens)[2])[None, None, :]

    def extend(beams: tf.Tensor, last_tokens: tf.Tensor) -> tf.Tensor:
        history = tf.gather(alive_tokens, beams, batch_dims=1)
        ending = tf.where(column == step, last_tokens[:, :, None], PAD_ID)
        return tf.where(column < step, history, ending)

    filled = selection.slot_filled
    eos = tf.fill(tf.shape(filled), EOS_ID)
    finished = FinishedHypotheses(
        tokens=tf.where(filled[:, :, None], extend(selection.finish_beams, eos), finished.tokens),
        scores=tf.where(filled, selection.finish_scores, finished.scores),
        lengths=tf.where(filled, step + 1, finished.lengths),
    )
    return extend(selection.alive_beams, selection.next_tokens), finished


def record_growing(
    selection: Selection,
    step: tf.Tensor,
    alive_tokens: tf.Tensor,
    finished: FinishedHypotheses,
    sentence_ids: tf.Tensor,
) -> tuple[tf.Tensor, FinishedHypotheses]:
    """`record` for a search whose done sentences leave (graph mode): the continuing
    histories hold just their `step` tokens and grow by one column, and the batch's
    finished store is written only in the sentences whose slots the step fills.

    Both keep a step's cost to what it adds (fixed-width buffers would be rewritten
    whole at every step).

    Args:
        selection: The step's `Selection`.
        step: Scalar int32, the tokens each hypothesis held before the step.
        alive_tokens: `[active, k, step]` int32 continuing hypotheses' tokens.
        finished: `FinishedHypotheses` of every sentence of the batch.
        sentence_ids: `[active]` int32, each active sentence's row in `finished`.

    Returns:
        `(alive_tokens, finished)` after the step, `alive_tokens` `step + 1` wide.
    """

    def extend(histories: tf.Tensor, beams: tf.Tensor, last_tokens: tf.Tensor) -> tf.Tensor:
        gathered = tf.gather(histories, beams, batch_dims=1)
        return tf.concat([gathered, last_tokens[:, :, None]], axis=2)

    filling = tf.reshape(tf.where(tf.reduce_any(selection.slot_filled, axis=1)), [-1])
    filling = tf.cast(filling, tf.int32)
    filled = tf.gather(selection.slot_filled, filling)
    eos = tf.fill(tf.shape(filled), EOS_ID)
    ended = extend(
        tf.gather(alive_tokens, filling), tf.gather(selection.finish_beams, filling), eos
    )
    columns_after = tf.shape(finished.tokens)[2] - step - 1
    ended = tf.pad(ended, [[0, 0], [0, 0], [0, columns_after]], constant_values=PAD_ID)
    rows = tf.gather(sentence_ids, filling)
    new = FinishedHypotheses(
        tokens=ended,
        scores=tf.gather(selection.finish_scores, filling),
        lengths=tf.fill(tf.shape(filled), step + 1),
    )
    finished = FinishedHypotheses(
        *(
            _update_rows(store, rows, filled, values, whole_batch=False)
            for store, values in zip(finished, new)
        )
    )
    return extend(alive_tokens, selection.alive_beams, selection.next_tokens), finished


def reorder_cache(cache: Any, beams: tf.Tensor, rows: tf.Tensor, beam_size: int) -> Any:
    """The caches of the hypotheses extended next: beam `beams[i, j]` of sentence `rows[i]`.

    One gather per block both reorders the hypotheses and drops the sentences not in
    `rows`.

    Args:
        cache: The decoder's incremental state, `beam_size` consecutive rows per sentence.
        beams: `[kept sentences, beam_size]` int32 beams (`0..beam_size-1`) to extend.
        rows: `[kept sentences]` int32 sentences, as indices into `cache`'s sentences.
        beam_size: Hypotheses per sentence.

    Returns:
        The reordered cache, `[kept sentences * beam_size, ...]` per block.
    """
    with tf.name_scope(REORDER_SCOPE):
        flat_beams = tf.reshape(beams + rows[:, None] * beam_size, [-1])
        return tf.nest.map_structure(lambda window: tf.gather(window, flat_beams), cache)


def apply_selection(
    constants: StepConstants, state: BeamState, selection: Selection, cache: Any
) -> BeamState:
    """The state after a step's `selection`: histories recorded, scores and counts updated.

    Args:
        constants: The search's `StepConstants`.
        state: The `BeamState` before the step.
        selection: The step's `Selection`.
        cache: The decoder's incremental state after the step.

    Returns:
        The `BeamState` after the step, its `step`, attention histories and active
        sentences unchanged.
    """
    if constants.drop_finished:
        alive_tokens, finished = record_growing(
            selection, state.step, state.alive_tokens, state.finished, state.sentence_ids
        )
    else:
        alive_tokens, finished = record(selection, state.step, state.alive_tokens, state.finished)
    return state._replace(
        cache=cache,
        last_tokens=tf.reshape(selection.next_tokens, [-1]),
        alive_scores=selection.alive_scores,
        alive_tokens=alive_tokens,
        finished_count=selection.finished_count,
        finished=finished,
    )


def search_step(
    decoder: IncrementalDecoder,
    constants: StepConstants,
    state: BeamState,
    vocabulary: OutputVocabulary | None = None,
) -> tuple[BeamState, Selection, tf.Tensor]:
    """A step but its attention histories and the leaving of done sentences.

    Args:
        decoder: The model's `ConvDecoder`.
        constants: The search's `StepConstants`.
        state: The `BeamState` before the step.
        vocabulary: An `OutputVocabulary` (a shortlist's columns), or None: the whole
            vocabulary.

    Returns:
        `(state, selection, attention)`: the state after `apply_selection`, the step's
        `Selection` and the decoder's `[active * k, source]` attention.
    """
    with tf.name_scope(DECODER_SCOPE):
        logits, attention, cache = decoder.step(
            state.last_tokens,
            state.step,
            state.cache,
            state.encoder_output,
            beam_size=constants.beam_size,
            output_subset=None if vocabulary is None else vocabulary.subset,
        )
    with tf.name_scope(SELECTION_SCOPE):
        log_probs, ids = candidates(constants, logits, state.step, state.max_lengths)
        if vocabulary is not None:
            # Columns to token ids (the special ids' columns are their ids).
            ids = tf.gather(vocabulary.ids, ids)
        selection = select(
            constants, log_probs, ids, state.alive_scores, state.finished_count, state.step
        )
    if not constants.drop_finished:
        # (When sentences leave, one gather reorders and drops them after the step.)
        active_rows = tf.range(tf.shape(state.alive_scores)[0])
        cache = reorder_cache(cache, selection.alive_beams, active_rows, constants.beam_size)
    with tf.name_scope(BOOKKEEPING_SCOPE):
        state = apply_selection(constants, state, selection, cache)
    return state, selection, attention


def search_step_function(
    decoder: IncrementalDecoder,
    constants: StepConstants,
    compile_step: bool | None = None,
    vocabulary: OutputVocabulary | None = None,
) -> Callable[[BeamState], tuple[BeamState, Selection, tf.Tensor]]:
    """`search_step` for one search, one XLA computation with `constants.xla`.

    The compiled step keeps fixed shapes (finished sentences stay in the batch), so it
    compiles once per search; the graph around it only loops.

    Args:
        decoder: The model's decoder.
        constants: The search's `StepConstants`.
        compile_step: Whether to XLA-compile the step on its own (default
            `constants.xla`); False when the whole loop around it is compiled.
        vocabulary: An `OutputVocabulary`, or None (see `search_step`).

    Returns:
        `step(state) -> (state, selection, attention)`.
    """

    def step(state: BeamState) -> tuple[BeamState, Selection, tf.Tensor]:
        return search_step(decoder, constants, state, vocabulary)

    if not (constants.xla if compile_step is None else compile_step):
        return step
    compiled = tf.function(step, jit_compile=True, autograph=False)

    def compiled_step(state: BeamState) -> tuple[BeamState, Selection, tf.Tensor]:
        # The attention histories grow by one step per step: passed in, they would
        # change the compiled step's input shapes at every step.
        histories = dict(
            alive_attention=state.alive_attention, finished_attention=state.finished_attention
        )
        state = state._replace(alive_attention=None, finished_attention=None)
        state, selection, attention = compiled(state)
        return state._replace(**histories), selection, attention

    return compiled_step


def _update_rows(
    store: tf.Tensor, rows: tf.Tensor, filled: tf.Tensor, new: tf.Tensor, whole_batch: bool
) -> tf.Tensor:
    """`store[rows] = where(filled, new, store[rows])` for `[batch, k, ...]` stores."""
    filled = tf.reshape(filled, tf.concat([tf.shape(filled), [1] * (new.shape.rank - 2)], 0))
    if whole_batch:  # rows is the whole batch, in order
        return tf.where(filled, new, store)
    current = tf.gather(store, rows)
    return tf.tensor_scatter_nd_update(store, rows[:, None], tf.where(filled, new, current))


def record_attention(
    constants: StepConstants, state: BeamState, selection: Selection, attention: tf.Tensor
) -> BeamState:
    """The attention histories after a step, extended as the token histories are.

    Args:
        constants: The search's `StepConstants`.
        state: The `BeamState` of the step (its attention histories and active
            sentences from before the step).
        selection: The step's `Selection`.
        attention: `[active * k, source]` float32, the step's attention.

    Returns:
        `state` with the attention histories one step longer.
    """
    active = tf.shape(state.sentence_ids)[0]
    step_attention = tf.reshape(attention, [active, constants.beam_size, 1, -1])

    def extended_attention(beams: tf.Tensor) -> tf.Tensor:
        return tf.concat(
            [
                tf.gather(state.alive_attention, beams, batch_dims=1),
                tf.gather(step_attention, beams, batch_dims=1),
            ],
            axis=2,
        )

    finished_attention = tf.pad(state.finished_attention, [[0, 0], [0, 0], [0, 1], [0, 0]])
    finished_attention = _update_rows(
        finished_attention,
        state.sentence_ids,
        selection.slot_filled,
        extended_attention(selection.finish_beams),
        whole_batch=not constants.drop_finished,
    )
    return state._replace(
        alive_attention=extended_attention(selection.alive_beams),
        finished_attention=finished_attention,
    )


def drop_finished_sentences(
    constants: StepConstants, state: BeamState, selection: Selection
) -> BeamState:
    """`state` without the sentences that hold `k` finished hypotheses.

    Args:
        constants: The search's `StepConstants`.
        state: The `BeamState` after `apply_selection` (and `record_attention`).
        selection: The step's `Selection`.

    Returns:
        The `BeamState` of the remaining sentences, their caches reordered by
        `selection`'s continuing beams.
    """
    remaining = tf.cast(
        tf.reshape(tf.where(state.finished_count < constants.beam_size), [-1]), tf.int32
    )
    shrink = tf.size(remaining) < tf.shape(state.sentence_ids)[0]

    def keep(tensor: tf.Tensor) -> tf.Tensor:
        return tf.gather(tensor, remaining)

    encoder_output = tf.cond(
        shrink,
        lambda: tf.nest.map_structure(keep, state.encoder_output),
        lambda: state.encoder_output,
    )
    alive_attention = state.alive_attention
    if constants.return_attention:
        alive_attention = keep(alive_attention)
    return state._replace(
        sentence_ids=keep(state.sentence_ids),
        encoder_output=encoder_output,
        max_lengths=keep(state.max_lengths),
        cache=reorder_cache(
            state.cache, keep(selection.alive_beams), remaining, constants.beam_size
        ),
        last_tokens=tf.reshape(keep(selection.next_tokens), [-1]),
        alive_scores=keep(state.alive_scores),
        alive_tokens=keep(state.alive_tokens),
        finished_count=keep(state.finished_count),
        alive_attention=alive_attention,
    )
