"""Incremental beam search for ConvS2S in core TensorFlow ops.

The search follows the authors' implementation (fairseq's `SequenceGenerator`), so that
imported checkpoints give the same hypotheses:

* log-probabilities are a float32 log-softmax of the logits; `<pad>` is never chosen,
  `<unk>` loses `unk_penalty`, `</s>` is forbidden before `min_length` tokens and is
  the only choice once a sentence reaches its maximum length;
* at the first step only one copy of each sentence's beam is expanded;
* each step ranks `2 * beam` candidates per sentence by cumulative log-probability;
  candidates ending in `</s>` that rank within the first `beam` are finished, with
  score `cumulative / length ** alpha` (`length` counting `</s>`), and the first `beam`
  candidates not ending in `</s>` continue;
* a sentence is done once it holds `beam` finished hypotheses; the loop exits early
  once every sentence is done.

Every decoder step feeds one new position per hypothesis and reorders the cached
convolution windows by the surviving beams; nothing earlier is recomputed. The maximum
output length `a * source_length + b` is computed per sentence, so a sentence's result
does not depend on the other sentences in its batch.
"""

import collections

import tensorflow as tf

from convs2s_tf.vocabulary import EOS_ID, PAD_ID, UNK_ID

SearchOutput = collections.namedtuple("SearchOutput", ["tokens", "scores", "lengths", "attention"])
SearchOutput.__doc__ = """The n-best hypotheses of every sentence, best first.

Fields:
    tokens: `[batch, nbest, time]` int32, each ending in `</s>` then `<pad>`.
    scores: `[batch, nbest]` float32, `sum log p / length ** alpha`.
    lengths: `[batch, nbest]` int32, tokens including `</s>`.
    attention: `[batch, nbest, time, source]` float32 attention averaged over the
        decoder's attention blocks, or None when not requested.
"""

_NEG_INF = float("-inf")


def max_output_lengths(source, max_len_a, max_len_b, limit, pad_id=PAD_ID):
    """Per sentence `min(int(a * source_length + b), limit)`, `source_length` counting `</s>`."""
    source_length = tf.reduce_sum(tf.cast(tf.not_equal(source, pad_id), tf.float32), axis=1)
    lengths = tf.cast(max_len_a * source_length + max_len_b, tf.int32)
    return tf.minimum(lengths, limit)


def _gather_beams(tensor, flat_indices):
    return tf.gather(tensor, flat_indices, axis=0)


def beam_search(
    model,
    source,
    beam_size=5,
    max_len_a=0.0,
    max_len_b=200,
    min_length=1,
    length_penalty=1.0,
    unk_penalty=0.0,
    nbest=1,
    return_attention=False,
    jit_compile_step=False,
    incremental=True,
):
    """Translates `source` with beam search (greedy when `beam_size == 1`).

    Args:
        model: A `ConvS2S`.
        source: `[batch, source]` int32 token ids ending in `</s>`, padded with `<pad>`.
        beam_size: Beam width `K`.
        max_len_a: `a` of the maximum output length `a * source_length + b` (tokens
            before `</s>`), never beyond what the position table allows.
        max_len_b: `b` of the maximum output length.
        min_length: Minimum number of tokens before `</s>`.
        length_penalty: `alpha` in `score / length ** alpha` (1 = plain normalisation).
        unk_penalty: Subtracted from the log-probability of `<unk>`.
        nbest: Hypotheses returned per sentence (at most `beam_size`).
        return_attention: Also return each hypothesis' attention.
        jit_compile_step: XLA-compile the decoder step (the search bookkeeping stays in
            graph mode: XLA on the whole loop was seen to be far slower on CPU).
        incremental: False recomputes the whole prefix at every step instead of using
            the cached windows; only for measuring what the cache saves.

    Returns:
        A `SearchOutput`.
    """
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be between 1 and beam_size={beam_size}, got {nbest}.")
    decoder = model.decoder
    source = tf.convert_to_tensor(source, tf.int32)
    batch_size = tf.shape(source)[0]
    source_length = tf.shape(source)[1]
    k = beam_size
    num_hypotheses = batch_size * k
    vocab_size = decoder.vocab_size
    # Step t feeds position t of the decoder input, whose last usable index is
    # max_length - 1; the last step may only produce </s>.
    limit = decoder.max_length - 1
    max_lengths = max_output_lengths(source, max_len_a, max_len_b, limit, decoder.pad_id)
    max_steps = tf.reduce_max(max_lengths) + 1

    encoder_output = model.encode(source, training=False)
    encoder_output = tf.nest.map_structure(lambda t: tf.repeat(t, k, axis=0), encoder_output)
    incremental_state = decoder.initial_state(num_hypotheses)

    # Only the first copy of each beam is alive at the first step.
    alive_scores = tf.tile(
        tf.concat([tf.zeros([1, 1]), tf.fill([1, k - 1], _NEG_INF)], axis=1), [batch_size, 1]
    )
    alive_tokens = tf.fill([batch_size, k, 0], EOS_ID)  # grows by one column per step
    finished_tokens = tf.fill([batch_size, k, 0], PAD_ID)
    finished_scores = tf.fill([batch_size, k], _NEG_INF)
    finished_lengths = tf.zeros([batch_size, k], tf.int32)
    finished_count = tf.zeros([batch_size], tf.int32)
    alive_attention = tf.zeros([batch_size, k, 0, source_length])
    finished_attention = tf.zeros([batch_size, k, 0, source_length])

    vocab_ids = tf.range(vocab_size)
    # Fixed per-token adjustments of the log-probabilities.
    token_bias = tf.where(
        tf.equal(vocab_ids, PAD_ID),
        _NEG_INF,
        tf.where(tf.equal(vocab_ids, UNK_ID), -float(unk_penalty), 0.0),
    )
    is_eos_column = tf.equal(vocab_ids, EOS_ID)
    two_k = 2 * k
    candidate_rank = tf.range(two_k)[None, :]
    hypothesis_max_lengths = tf.repeat(max_lengths, k)

    def condition(
        step,
        incremental_state,
        alive_scores,
        alive_tokens,
        alive_attention,
        finished_count,
        *finished,
    ):
        return tf.logical_and(step < max_steps, tf.reduce_any(finished_count < k))

    def decoder_step(tokens, step, incremental_state, history):
        if incremental:
            return decoder.step(tokens, step, incremental_state, encoder_output)
        # Baseline without caches: the full parallel pass over the prefix, last position.
        decoder_input = tf.concat([tf.fill([num_hypotheses, 1], EOS_ID), history], axis=1)
        logits, attention = decoder(decoder_input, encoder_output, return_attention=True)
        if attention is None:
            attention = tf.zeros([num_hypotheses, 1, source_length])
        return logits[:, -1], attention[:, -1], incremental_state

    if jit_compile_step:
        decoder_step = tf.function(decoder_step, jit_compile=True)

    def body(
        step,
        incremental_state,
        alive_scores,
        alive_tokens,
        alive_attention,
        finished_count,
        finished_tokens,
        finished_scores,
        finished_lengths,
        finished_attention,
    ):
        previous = tf.cond(
            step > 0,
            lambda: tf.reshape(alive_tokens[:, :, -1], [-1]),
            lambda: tf.fill([num_hypotheses], EOS_ID),
        )
        history = tf.reshape(alive_tokens, [num_hypotheses, -1])
        logits, attention, incremental_state = decoder_step(
            previous, step, incremental_state, history
        )
        # log-softmax without materialising it: candidates come from the adjusted logits
        # and only they are normalised by the log-sum-exp.
        normaliser = tf.reduce_logsumexp(logits, axis=-1, keepdims=True)
        adjusted = logits + token_bias
        forbid_eos = step < min_length
        force_eos = step >= hypothesis_max_lengths
        adjusted = tf.where(tf.logical_and(is_eos_column, forbid_eos)[None, :], _NEG_INF, adjusted)
        adjusted = tf.where(
            tf.logical_and(force_eos[:, None], tf.logical_not(is_eos_column)[None, :]),
            _NEG_INF,
            adjusted,
        )
        top_logits, top_ids = tf.math.top_k(adjusted, k=min(two_k, vocab_size))
        top_log_probs = top_logits - normaliser
        per_row = top_ids.shape[-1]
        cumulative = tf.reshape(alive_scores, [-1, 1]) + top_log_probs
        cumulative = tf.reshape(cumulative, [batch_size, k * per_row])
        candidate_scores, flat = tf.math.top_k(cumulative, k=min(two_k, k * per_row))
        num_candidates = candidate_scores.shape[-1]
        candidate_beams = flat // per_row
        candidate_tokens = tf.gather(
            tf.reshape(top_ids, [batch_size, k * per_row]), flat, batch_dims=1
        )
        candidate_is_eos = tf.equal(candidate_tokens, EOS_ID)
        rank = candidate_rank[:, :num_candidates]
        valid = candidate_scores > _NEG_INF

        # Finish </s> candidates ranked within the first k, first come first served.
        finishing = candidate_is_eos & (rank < k) & valid
        slot = finished_count[:, None] + tf.cumsum(tf.cast(finishing, tf.int32), axis=1) - 1
        accepted = finishing & (slot < k)
        length = step + 1
        normalised = candidate_scores / tf.pow(tf.cast(length, tf.float32), length_penalty)
        batch_index = tf.broadcast_to(tf.range(batch_size)[:, None], tf.shape(slot))
        scatter_index = tf.stack([batch_index, slot], axis=-1)
        accepted_index = tf.boolean_mask(scatter_index, accepted)

        candidate_history = tf.gather(alive_tokens, candidate_beams, batch_dims=1)
        candidate_sequences = tf.concat([candidate_history, candidate_tokens[:, :, None]], 2)
        finished_tokens = tf.concat([finished_tokens, tf.fill([batch_size, k, 1], PAD_ID)], axis=2)
        finished_tokens = tf.tensor_scatter_nd_update(
            finished_tokens, accepted_index, tf.boolean_mask(candidate_sequences, accepted)
        )
        finished_scores = tf.tensor_scatter_nd_update(
            finished_scores, accepted_index, tf.boolean_mask(normalised, accepted)
        )
        finished_lengths = tf.tensor_scatter_nd_update(
            finished_lengths,
            accepted_index,
            tf.fill(tf.shape(accepted_index)[:1], length),
        )
        finished_count = tf.minimum(
            finished_count + tf.reduce_sum(tf.cast(finishing, tf.int32), axis=1), k
        )

        step_attention = tf.reshape(attention, [batch_size, k, 1, -1])
        if return_attention:
            candidate_attention = tf.concat(
                [
                    tf.gather(alive_attention, candidate_beams, batch_dims=1),
                    tf.gather(step_attention, candidate_beams, batch_dims=1),
                ],
                axis=2,
            )
            finished_attention = tf.concat(
                [finished_attention, tf.zeros_like(step_attention)], axis=2
            )
            finished_attention = tf.tensor_scatter_nd_update(
                finished_attention,
                accepted_index,
                tf.boolean_mask(candidate_attention, accepted),
            )

        # The first k candidates that do not end in </s> continue.
        order_key = tf.where(candidate_is_eos | ~valid, rank + num_candidates, rank)
        _, keep = tf.math.top_k(-order_key, k=k)
        alive_scores = tf.gather(candidate_scores, keep, batch_dims=1)
        alive_beams = tf.gather(candidate_beams, keep, batch_dims=1)
        alive_tokens = tf.gather(candidate_sequences, keep, batch_dims=1)
        if return_attention:
            alive_attention = tf.gather(candidate_attention, keep, batch_dims=1)
        # A continuing candidate that is in fact </s> (too few others) must stay dead.
        kept_eos = tf.gather(candidate_is_eos | ~valid, keep, batch_dims=1)
        alive_scores = tf.where(kept_eos, _NEG_INF, alive_scores)

        flat_beams = tf.reshape(alive_beams + tf.range(batch_size)[:, None] * k, [-1])
        incremental_state = tf.nest.map_structure(
            lambda window: _gather_beams(window, flat_beams), incremental_state
        )
        return (
            step + 1,
            incremental_state,
            alive_scores,
            alive_tokens,
            alive_attention,
            finished_count,
            finished_tokens,
            finished_scores,
            finished_lengths,
            finished_attention,
        )

    loop_vars = (
        tf.constant(0),
        incremental_state,
        alive_scores,
        alive_tokens,
        alive_attention,
        finished_count,
        finished_tokens,
        finished_scores,
        finished_lengths,
        finished_attention,
    )
    hypotheses = tf.TensorShape([None, k])
    shape_invariants = (
        tf.TensorShape([]),
        tf.nest.map_structure(
            lambda t: tf.TensorShape([None]).concatenate(t.shape[1:]), incremental_state
        ),
        hypotheses,
        tf.TensorShape([None, k, None]),
        tf.TensorShape([None, k, None, None]),
        tf.TensorShape([None]),
        tf.TensorShape([None, k, None]),
        hypotheses,
        hypotheses,
        tf.TensorShape([None, k, None, None]),
    )
    outputs = tf.while_loop(
        condition,
        body,
        loop_vars,
        shape_invariants=shape_invariants,
        maximum_iterations=decoder.max_length,
    )
    (
        _,
        _,
        _,
        _,
        _,
        _,
        finished_tokens,
        finished_scores,
        finished_lengths,
        finished_attention,
    ) = outputs
    best_scores, order = tf.math.top_k(finished_scores, k=nbest)
    tokens = tf.gather(finished_tokens, order, batch_dims=1)
    lengths = tf.gather(finished_lengths, order, batch_dims=1)
    # Trim columns no kept hypothesis uses.
    width = tf.maximum(tf.reduce_max(lengths), 1)
    tokens = tokens[:, :, :width]
    attention = None
    if return_attention:
        attention = tf.gather(finished_attention, order, batch_dims=1)[:, :, :width]
    return SearchOutput(tokens=tokens, scores=best_scores, lengths=lengths, attention=attention)
