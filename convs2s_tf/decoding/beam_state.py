"""The state of a beam search between two steps (the `tf.while_loop` variables), and
what the search returns of it (`SearchOutput`)."""

from __future__ import annotations

import collections
from typing import Any, NamedTuple

import tensorflow as tf

from convs2s_tf.decoding.decoder_protocol import IncrementalDecoder
from convs2s_tf.decoding.growing_state import state_invariants
from convs2s_tf.decoding.step_constants import NEG_INF, StepConstants
from convs2s_tf.vocabulary import EOS_ID, PAD_ID


class SearchOutput(NamedTuple):
    """What a beam search returns: the n-best hypotheses of every sentence, best first.

    Fields:
        tokens: `[batch, nbest, time]` int32, each ending in `</s>` then `<pad>`.
        scores: `[batch, nbest]` float32, `sum log p / length ** alpha`.
        lengths: `[batch, nbest]` int32, tokens including `</s>`.
        attention: `[batch, nbest, time, source]` float32 attention averaged over the
            decoder's attention blocks, or None when not requested.
    """

    tokens: tf.Tensor
    scores: tf.Tensor
    lengths: tf.Tensor
    attention: tf.Tensor | None


FinishedHypotheses = collections.namedtuple("FinishedHypotheses", ["tokens", "scores", "lengths"])
FinishedHypotheses.__doc__ = """Each sentence's `k` slots for finished hypotheses.

Fields:
    tokens: `[sentences, k, width]` int32, each ending in `</s>` then `<pad>`.
    scores: `[sentences, k]` float32 normalised scores, -inf in an empty slot.
    lengths: `[sentences, k]` int32 tokens including `</s>`, 0 in an empty slot.
"""

BeamState = collections.namedtuple(
    "BeamState",
    [
        "step",
        "sentence_ids",
        "encoder_output",
        "max_lengths",
        "cache",
        "last_tokens",
        "alive_scores",
        "alive_tokens",
        "finished_count",
        "finished",
        "alive_attention",
        "finished_attention",
    ],
)
BeamState.__doc__ = """A beam search between two steps.

Most fields cover the active sentences, those still searched (in the batch's order;
with `StepConstants.drop_finished` a sentence leaves once done, otherwise all stay);
`finished` and `finished_attention` cover every sentence of the batch.

Fields:
    step: Scalar int32, the tokens each hypothesis holds (the decoder input position the
        next step feeds).
    sentence_ids: `[active]` int32, each active sentence's row in the batch.
    encoder_output: `EncoderOutput` with one row per active sentence.
    max_lengths: `[active]` int32 maximum output lengths (tokens before `</s>`).
    cache: The decoder's incremental state, one row per hypothesis (`[active * k, ...]`,
        a sentence's `k` hypotheses consecutive).
    last_tokens: `[active * k]` int32, each hypothesis' last token (`</s>` at first).
    alive_scores: `[active, k]` float32 cumulative log-probabilities of the continuing
        hypotheses, -inf for none (at first only one copy of each beam is alive).
    alive_tokens: `[active, k, width]` int32 their tokens, then `<pad>` (`[active, k,
        step]`, their tokens alone, when the histories grow).
    finished_count: `[active]` int32 finished hypotheses (at most `k`).
    finished: `FinishedHypotheses` of every sentence.
    alive_attention: `[active, k, step, source]` float32 attention of the continuing
        hypotheses (no steps when not kept).
    finished_attention: `[batch, k, step, source]` float32 attention of the finished ones.
"""


def initial_beam_state(
    beam_size: int,
    encoder_output: Any,
    max_lengths: tf.Tensor,
    cache: Any,
    width: int | tf.Tensor,
    source_length: int | tf.Tensor,
    growing: bool = False,
) -> BeamState:
    """The state before the first step.

    Args:
        beam_size: Beam width `k`.
        encoder_output: `EncoderOutput` of the batch.
        max_lengths: `[batch]` int32 maximum output lengths.
        cache: The decoder's initial incremental state for `batch * k` hypotheses.
        width: Columns of the token histories (at least the longest output).
        source_length: Source positions of the attention histories.
        growing: Whether the continuing hypotheses' histories start empty and grow by a
            column a step (`record_growing`) rather than fill `width` columns.

    Returns:
        A `BeamState`.
    """
    batch_size = tf.shape(max_lengths)[0]
    first_beam_only = tf.concat([tf.zeros([1, 1]), tf.fill([1, beam_size - 1], NEG_INF)], axis=1)
    no_attention = tf.zeros([batch_size, beam_size, 0, source_length])
    return BeamState(
        step=tf.constant(0),
        sentence_ids=tf.range(batch_size),
        encoder_output=encoder_output,
        max_lengths=max_lengths,
        cache=cache,
        last_tokens=tf.fill([batch_size * beam_size], EOS_ID),
        alive_scores=tf.tile(first_beam_only, [batch_size, 1]),
        alive_tokens=tf.fill([batch_size, beam_size, 0 if growing else width], PAD_ID),
        finished_count=tf.zeros([batch_size], tf.int32),
        finished=FinishedHypotheses(
            tokens=tf.fill([batch_size, beam_size, width], PAD_ID),
            scores=tf.fill([batch_size, beam_size], NEG_INF),
            lengths=tf.zeros([batch_size, beam_size], tf.int32),
        ),
        alive_attention=no_attention,
        finished_attention=no_attention,
    )


def shape_invariants(
    constants: StepConstants, state: BeamState, decoder: IncrementalDecoder, growing: bool = True
) -> BeamState:
    """The `tf.while_loop` shape invariants of `state`'s fields.

    The active sentences' count changes when they leave the batch
    (`constants.drop_finished`), the token histories' width is only known when the loop
    runs, the attention histories grow by one step per step and, when the loop grows it
    (`growing`), the `decoder`'s state on its position axes (`state_invariants`; a
    compiled loop's phase keeps their width, so a step knows it).
    """
    k = constants.beam_size

    def batch_major(tensor: tf.Tensor) -> tf.TensorShape:
        return tf.TensorShape([None]).concatenate(tensor.shape[1:])

    def active_rows(tensor: tf.Tensor) -> tf.TensorShape:
        return batch_major(tensor) if constants.drop_finished else tensor.shape

    return BeamState(
        step=tf.TensorShape([]),
        sentence_ids=active_rows(state.sentence_ids),
        encoder_output=tf.nest.map_structure(active_rows, state.encoder_output),
        max_lengths=active_rows(state.max_lengths),
        cache=state_invariants(decoder, state.cache, growing),
        last_tokens=tf.TensorShape([None]),
        alive_scores=tf.TensorShape([None, k]),
        alive_tokens=tf.TensorShape([None, k, None]),
        finished_count=tf.TensorShape([None]),
        finished=FinishedHypotheses(
            tokens=tf.TensorShape([None, k, None]),
            scores=tf.TensorShape([None, k]),
            lengths=tf.TensorShape([None, k]),
        ),
        alive_attention=tf.TensorShape([None, k, None, None]),
        finished_attention=tf.TensorShape([None, k, None, None]),
    )
