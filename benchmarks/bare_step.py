"""One search step alone in a loop, without the search around it: what
`benchmarks.request_parts` (one sentence) and `benchmarks.batch_step_parts` (many)
time against the float32 floor."""

_BARE_STEPS = 32  # steps of a bare step loop per timed call


def bare_step_timer(model, search, encoder_output, max_lengths, selection, xla=True):
    """A function returning the seconds of one step of `max_lengths`' sentences alone in
    a loop (XLA, or graph mode): the decoder's step and, with `selection`, the search's
    candidates, selection and cache reordering (everything of a search step but
    recording the histories and, in graph mode, dropping the sentences that are done).
    The loop is traced (and compiled) on the first call only; each call times it anew.
    `search` is a `BucketedSearch` (its beam, constants and folded kernels);
    `encoder_output` is the sentences' (padded to the bucket's positions for XLA) and
    `max_lengths` their `[sentences]` length limits.

    The cache is carried from step to step and the logits summed into the carry, so no
    step can be skipped; without `selection` the next tokens are fixed. Every row stays
    in the loop, as in a search's first steps.
    """
    import tensorflow as tf

    from benchmarks.float32_floor import best_seconds
    from convs2s_tf.decoding.candidates import candidates
    from convs2s_tf.decoding.search_step import reorder_cache
    from convs2s_tf.decoding.selection import select
    from convs2s_tf.layers import frozen_kernels

    decoder, constants = model.decoder, search.constants
    beam = constants.beam_size
    sentences = int(max_lengths.shape[0])
    rows = sentences * beam

    def body(step, tokens, scores, cache, carry):
        logits, _, cache = decoder.step(tokens, step, cache, encoder_output, beam)
        carry += 1e-30 * tf.reduce_sum(logits)
        if not selection:
            return step + 1, tf.fill([rows], 4 + step % 16), scores, cache, carry
        log_probs, ids = candidates(constants, logits, step, max_lengths)
        finished_count = tf.zeros([sentences], tf.int32)
        chosen = select(constants, log_probs, ids, scores, finished_count, step)
        cache = reorder_cache(cache, chosen.alive_beams, tf.range(sentences), beam)
        return step + 1, tf.reshape(chosen.next_tokens, [-1]), chosen.alive_scores, cache, carry

    @tf.function(jit_compile=xla, autograph=False)
    def run(steps):
        with frozen_kernels(model, search.kernels):
            start = (
                0,
                tf.fill([rows], 2),
                tf.zeros([sentences, beam]),
                decoder.initial_state(rows, max_steps=search.history_width),
                tf.constant(0.0),
            )
            return tf.while_loop(lambda step, *_: step < steps, body, start)[-1]

    # The number of steps is an input, as in a search: XLA cannot unroll the loop.
    steps = tf.constant(_BARE_STEPS)
    return lambda: best_seconds(lambda: run(steps).numpy()) / _BARE_STEPS
