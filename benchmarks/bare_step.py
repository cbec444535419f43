"""One search step alone in a loop, without the search around it: what
`benchmarks.request_parts` (one sentence) and `benchmarks.batch_step_parts` (many)
time against the float32 floor."""

import math

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


def _dense(layer):
    """A `WeightNormDense`'s effective kernel and bias (zeros if none), as constants."""
    import tensorflow as tf

    kernel = tf.constant(layer.kernel.numpy())
    bias = layer.bias if layer.bias is not None else tf.zeros([kernel.shape[-1]])
    return kernel, tf.constant(tf.convert_to_tensor(bias).numpy())


def minimal_step(decoder, encoder_output):
    """One float32 ConvS2S decoder step for one sentence's beam, written as plainly as
    TensorFlow's ops allow: each block's product over its flattened window, GLU,
    attention over the sentence's own source positions (no padding, so no mask), the
    residual; then the two output products. The effective weights are computed once.
    Its logits equal `decoder.step`'s: it is the same arithmetic, without the library's
    general shapes (batches of sentences, padded sources, dtypes, shortlists).

    Args:
        decoder: A float32 `ConvDecoder`.
        encoder_output: One sentence's `EncoderOutput` (`[1, source, embed_dim]`), unpadded.

    Returns:
        `step(tokens, step, windows) -> (logits, windows)`: `[rows]` tokens, the scalar
        step, and one `[rows, k - 1, c_in]` window per block (`decoder.initial_state`).
    """
    import tensorflow as tf

    half = math.sqrt(0.5)
    keys = tf.constant(encoder_output.keys[0].numpy())
    values = tf.constant(encoder_output.values[0].numpy())
    context_scale = math.sqrt(float(keys.shape[0]))
    blocks = []
    for block in decoder.blocks:
        kernel = block.convolution.kernel.numpy()
        attention = block.attention
        blocks.append(
            (
                tf.constant(kernel.reshape(-1, kernel.shape[-1])),
                tf.constant(block.convolution.bias.numpy()),
                (
                    (_dense(attention.in_projection), _dense(attention.out_projection))
                    if attention is not None
                    else None
                ),
                _dense(block.projection) if block.projection is not None else None,
            )
        )
    input_projection = _dense(decoder.input_projection)
    hidden_projection = _dense(decoder.hidden_projection)
    if decoder.output_projection is not None:
        output_projection = _dense(decoder.output_projection)
    else:
        table = decoder.token_embedding.embeddings.numpy()
        output_projection = (tf.constant(table.T), tf.constant(decoder.output_bias.numpy()))

    def affine(x, weights):
        return tf.matmul(x, weights[0]) + weights[1]

    def step(tokens, step, windows):
        embedded = decoder.embed(tokens[:, None], training=False, step=step)[:, 0]
        x = affine(embedded, input_projection)
        block_inputs, new_windows = [x], []
        for block, (kernel, bias, attention, projection), window in zip(
            decoder.blocks, blocks, windows
        ):
            full_window = tf.concat([window, x[:, None]], axis=1)
            new_windows.append(full_window[:, 1:])
            rows = tf.reshape(full_window, [-1, kernel.shape[0]])
            linear, gate = tf.split(tf.matmul(rows, kernel) + bias, 2, axis=-1)
            h = linear * tf.sigmoid(gate)
            if attention is not None:
                query = (affine(h, attention[0]) + embedded) * half
                weights = tf.nn.softmax(tf.matmul(query, keys, transpose_b=True))
                context = tf.matmul(weights, values) * context_scale
                h = (affine(context, attention[1]) + h) * half
            if block.residual:
                residual = block_inputs[-block.residual]
                if projection is not None:
                    residual = affine(residual, projection)
                h = (h + residual) * half
            x = h
            block_inputs.append(x)
        logits = affine(affine(x, hidden_projection), output_projection)
        return logits, tuple(new_windows)

    return step


def minimal_step_timer(decoder, encoder_output, beam, xla=True):
    """A function returning the seconds of one `minimal_step` of a `beam`-row sentence
    alone in a loop (XLA, or graph mode), its windows carried and each row's next token
    its logits' argmax, so that the whole vocabulary product is used and no step can be
    skipped. Traced (and compiled) on the first call only."""
    import tensorflow as tf

    from benchmarks.float32_floor import best_seconds

    step_function = minimal_step(decoder, encoder_output)

    def body(step, tokens, windows):
        logits, windows = step_function(tokens, step, windows)
        # Ids 4.. (no special token), bounded as the bare step's fixed tokens are.
        tokens = tf.cast(tf.argmax(logits, axis=-1), tf.int32) % 16 + 4
        return step + 1, tokens, windows

    @tf.function(jit_compile=xla, autograph=False)
    def run(steps):
        start = (0, tf.fill([beam], 2), decoder.initial_state(beam))
        return tf.while_loop(lambda step, *_: step < steps, body, start)[1]

    steps = tf.constant(_BARE_STEPS)
    return lambda: best_seconds(lambda: run(steps).numpy()) / _BARE_STEPS
