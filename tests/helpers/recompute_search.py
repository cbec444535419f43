"""A beam search that recomputes every hypothesis' whole prefix at every step.

The tests' independent check of the incremental search's decoder states (cached
convolution windows, self-attention buffers that grow): the
library's candidates, selection, recording and dropping of finished sentences, but each
step runs the decoder's parallel pass over every hypothesis' whole prefix (with the
kernels computed from the variables, not folded) and keeps its last position, with no
cache at all.
"""

import tensorflow as tf

from convs2s_tf.decoding.beam_search import max_output_lengths, n_best, step_until_done
from convs2s_tf.decoding.beam_state import initial_beam_state
from convs2s_tf.decoding.candidates import candidates
from convs2s_tf.decoding.search_step import apply_selection, drop_finished_sentences
from convs2s_tf.decoding.selection import select
from convs2s_tf.decoding.step_constants import StepConstants
from convs2s_tf.vocabulary import EOS_ID


def recompute_beam_search(model, source, search_config):
    """`beam_search(model, source, search_config)` without caches.

    Args:
        model: A `ConvS2S` or another family's model (its `encoder` gives what its
            decoder's parallel pass reads).
        source: `[batch, source]` int32 token ids ending in `</s>`, padded with `<pad>`.
        search_config: A `SearchConfig` (not `xla`: this search is never compiled).

    Returns:
        A `SearchOutput` without attention.
    """
    if search_config.xla:
        raise ValueError("The recomputing search has no XLA-compiled step.")
    decoder = model.decoder
    constants = StepConstants(
        beam_size=search_config.beam_size,
        vocab_size=decoder.vocab_size,
        min_length=search_config.min_length,
        length_penalty=search_config.length_penalty,
        unk_penalty=search_config.unk_penalty,
    )
    source = tf.convert_to_tensor(source, tf.int32)
    limit = decoder.max_length - 1
    max_lengths = max_output_lengths(
        source, search_config.max_len_a, search_config.max_len_b, limit, decoder.pad_id
    )
    max_steps = tf.reduce_max(max_lengths) + 1
    state = initial_beam_state(
        constants.beam_size,
        encoder_output=model.encoder(source, training=False),
        max_lengths=max_lengths,
        cache=(),
        width=max_steps,
        source_length=tf.shape(source)[1],
        growing=constants.drop_finished,
    )

    def body(state):
        logits = _last_position_logits(decoder, state, constants.beam_size)
        log_probs, ids = candidates(constants, logits, state.step, state.max_lengths)
        selection = select(
            constants, log_probs, ids, state.alive_scores, state.finished_count, state.step
        )
        state = apply_selection(constants, state, selection, cache=())
        return drop_finished_sentences(constants, state, selection)

    state = step_until_done(decoder, constants, state, max_steps, body)
    return n_best(state, search_config.nbest, tf.shape(source)[1])


def _last_position_logits(decoder, state, beam_size):
    """The next-token logits of every hypothesis, from a parallel pass over its prefix."""
    prefixes = tf.reshape(state.alive_tokens[:, :, : state.step], [-1, state.step])
    hypotheses = tf.shape(prefixes)[0]
    decoder_input = tf.concat([tf.fill([hypotheses, 1], EOS_ID), prefixes], axis=1)
    encoder_output = tf.nest.map_structure(
        lambda t: tf.repeat(t, beam_size, axis=0), state.encoder_output
    )
    return decoder(decoder_input, encoder_output)[:, -1]
