"""How fast any float32 search of a model could be on this CPU: its matrix products and
its beam selection alone.

Run by `benchmarks.compare_fairseq` (part `floor`), so that its bounds stand beside
fairseq's figures of the same run. Identical translations need the same float32
products: at every step, each of a sentence's beam rows is multiplied by every decoder
weight matrix (the vocabulary projection included, since any logit may decide the beam),
and the encoder multiplies each source position by every encoder matrix. Everything else
is left out (embeddings, attention, convolution state, bookkeeping), so the bounds are
below what any implementation reaches:

* batch 1: per sentence, its steps times the time of one step's products at beam-size
  rows (the fastest of an XLA computation looping over steps, so no call overhead, and
  graph-mode oneDNN kernels), plus its encoder's products at the peak rate below;
* batch N: all products of all sentences (each sentence's beam rows for each of its
  steps, as a search that drops finished sentences computes them, and the attention's
  score and context products), divided by the highest float32 product rate measured
  here (a large square product, and one step's products at N x beam rows).

A second pair of bounds adds the one other pass identical translations need at every
step: the beam selection, each row's log-probabilities over the whole vocabulary (the
log-sum-exp normaliser differs between rows, so every logit is read and exponentiated)
added to its hypothesis score, then the best `2 x beam_size` of each sentence. It is
timed the same way, at 1 sentence and at N, fastest of XLA and graph kernels. It follows
the last product and the next step's products follow it, so the two add up.

A third bound, for batches sent as `floor_share` sends them, times each step's decoder
products at the rows that step has (`active_rows`): a search that drops finished
sentences, as fairseq's and this project's do, multiplies fewer rows as a batch goes on,
and small products run below the peak rate the batch-N bound assumes. A fourth, for
batch 1 (`shapes_batch1_seconds`), times every product of a request at the shapes it
has: the attention's over the sentence's source positions with each step's, and the
encoder's at those positions rather than at the peak rate.

A sentence's steps are those of this project's beam search, which equal fairseq's (the
translations are identical): the length of the longest of its `beam_size` finished
hypotheses.
"""

import time

import numpy as np
import tensorflow as tf

from convs2s_tf.decoding import beam_search
from convs2s_tf.decoding.candidates import _log_normaliser, _top_k_and_row_max
from convs2s_tf.vocabulary import PAD_ID

_TIMED_STEPS = 64  # steps per timed call of the step's products
_REPEATS = 5  # timed calls; the fastest counts
_SQUARE = 2048  # side of the square product that measures the peak rate


def _matrices(layer):
    """The `[inputs, outputs]` float32 matrices of `layer`'s kernels (a convolution's
    window flattened into its inputs), as one position multiplies them."""
    matrices = []
    for variable in layer.variables:
        if variable.path.endswith("kernel_v"):
            value = variable.numpy().astype(np.float32)
            matrices.append(value.reshape(-1, value.shape[-1]))
    return matrices


def _decoder_matrices(decoder):
    """The decoder's matrices, the token table among them when it is also the output
    projection."""
    matrices = _matrices(decoder)
    if not any(v.path.endswith("output_projection/kernel_v") for v in decoder.variables):
        table = next(v for v in decoder.variables if v.path.endswith("token_embedding/embeddings"))
        matrices.append(table.numpy().astype(np.float32).T)
    return matrices


def _flops(matrices):
    """Floating-point operations of one row through every matrix."""
    return sum(2 * matrix.shape[0] * matrix.shape[1] for matrix in matrices)


def best_seconds(function):
    """Seconds of the fastest of `_REPEATS` calls of `function`, after an untimed one."""
    function()  # compiles or traces
    times = []
    for _ in range(_REPEATS):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def step_product_seconds(matrices, rows, xla):
    """Seconds of one step's products at `rows` rows (XLA or graph mode), timed over a
    loop of steps. Each product's input depends on the loop's carry, so no product can be
    hoisted out of the loop; each output is summed into the carry (a pass over the
    output, small beside the product)."""
    weights = [tf.constant(matrix) for matrix in matrices]
    inputs = [
        tf.random.stateless_normal([rows, m.shape[0]], seed=(1, i)) for i, m in enumerate(matrices)
    ]

    @tf.function(jit_compile=xla)
    def run():
        def body(step, carry):
            for x, w in zip(inputs, weights):
                # The whole product is used: a slice of it would let XLA compute
                # only that slice.
                carry = carry + 1e-30 * tf.reduce_sum(tf.matmul(x + carry, w))
            return step + 1, carry

        return tf.while_loop(lambda step, _: step < _TIMED_STEPS, body, (0, 0.0))[1]

    return best_seconds(lambda: run().numpy()) / _TIMED_STEPS


def _best_of_each_sentence(candidates, sentences, beam):
    """The best `2 x beam` of each sentence's candidates (`[sentences * beam, n]`)."""
    return tf.math.top_k(tf.reshape(candidates, [sentences, -1]), k=2 * beam)[0]


def select_whole(scores, logits, sentences, beam):
    """The best `2 x beam` of each sentence over all its rows' log-probabilities."""
    candidates = scores + tf.nn.log_softmax(logits)
    return _best_of_each_sentence(candidates, sentences, beam)


def select_per_row(scores, logits, sentences, beam):
    """The same selection with less sorting: a row's order is its logits' order, so each
    row's best `2 x beam` logits are found first, normalised by the row's log-sum-exp
    (which still reads every logit), then merged per sentence."""
    best, _ = tf.math.top_k(logits, k=2 * beam)
    candidates = scores + best - tf.reduce_logsumexp(logits, axis=-1, keepdims=True)
    return _best_of_each_sentence(candidates, sentences, beam)


def select_chunked(scores, logits, sentences, beam):
    """The same selection as this project's search makes it: the two-pass top-k over
    column chunks, whose chunk maxima also give each row's maximum for the log-sum-exp."""
    no_bias = tf.zeros([1], tf.float32)
    best, _, row_max = _top_k_and_row_max(logits, no_bias, 2 * beam)
    candidates = scores + best - _log_normaliser(logits, row_max)
    return _best_of_each_sentence(candidates, sentences, beam)


def selection_seconds(vocab_size, beam, sentences, xla):
    """Seconds of one step's beam selection for `sentences` sentences (XLA or graph
    mode), timed over a loop of steps, the fastest of three formulations: log-probabilities
    of `sentences x beam` rows of `vocab_size` logits, plus each row's score, then the
    top `2 x beam` of each sentence's candidates. The logits depend on the loop's carry,
    so nothing is hoisted out of the loop."""
    logits = tf.random.stateless_normal([sentences * beam, vocab_size], seed=(3, 0))
    scores = tf.random.stateless_normal([sentences * beam, 1], seed=(3, 1))

    def timed(select):
        @tf.function(jit_compile=xla)
        def run():
            def body(step, carry):
                best = select(scores, logits + carry, sentences, beam)
                return step + 1, carry + 1e-30 * tf.reduce_sum(best)

            return tf.while_loop(lambda step, _: step < _TIMED_STEPS, body, (0, 0.0))[1]

        return best_seconds(lambda: run().numpy()) / _TIMED_STEPS

    return min(timed(select) for select in (select_whole, select_per_row, select_chunked))


def batch1_step_seconds(model, beam):
    """The floor of one batch-1 step, `(products, selection)` in seconds: the decoder's
    products at `beam` rows and one sentence's selection, each the faster of XLA and
    graph mode."""
    products = min(
        step_product_seconds(_decoder_matrices(model.decoder), beam, xla) for xla in (True, False)
    )
    vocab = model.decoder.vocab_size
    selection = min(selection_seconds(vocab, beam, 1, xla) for xla in (True, False))
    return products, selection


def square_product_flops_per_second():
    """The float32 rate of a `_SQUARE`-sided product (oneDNN, every core)."""
    a = tf.random.stateless_normal([_SQUARE, _SQUARE], seed=(2, 0))
    b = tf.random.stateless_normal([_SQUARE, _SQUARE], seed=(2, 1))
    product = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
    return 2 * _SQUARE**3 / best_seconds(lambda: product().numpy())


def sentence_steps(model, tokenizer, sentences, search_config, batch_size=64):
    """(steps, source lengths with `</s>`) of each sentence's beam search."""
    search = search_config.replace(nbest=search_config.beam_size)
    steps, source_lengths = [], []
    for start in range(0, len(sentences), batch_size):
        ids = tokenizer.encode_with_eos(tf.constant(sentences[start : start + batch_size]))
        output = beam_search(model, ids.to_tensor(PAD_ID), search)
        steps += output.lengths.numpy().max(axis=1).tolist()
        source_lengths += ids.row_lengths().numpy().tolist()
    return np.array(steps), np.array(source_lengths)


def _attention_widths(model):
    """The embedding width of each of the decoder's attention blocks."""
    return [
        v.shape[-1]
        for v in model.decoder.variables
        if v.path.endswith("attention/in_projection/kernel_v")
    ]


def search_flops(model, steps, source_lengths, beam_size):
    """The float32 product operations of each sentence's search.

    Args:
        model: The `ConvS2S`.
        steps: `[sentences]` steps of each sentence's search.
        source_lengths: `[sentences]` source tokens of each, `</s>` included.
        beam_size: Rows per sentence and step.

    Returns:
        `(encoder, search)`: `[sentences]` operations of each encoder pass, and of each
        whole search (its encoder, and every step's rows through the decoder's matrices
        and each attention block's scores and context over the source).
    """
    decoder = _decoder_matrices(model.decoder)
    encoder = _flops(_matrices(model.encoder)) * np.asarray(source_lengths)
    attention_flops = sum(4 * embed for embed in _attention_widths(model)) * np.asarray(
        source_lengths
    )
    row_step = _flops(decoder) + attention_flops
    return encoder, encoder + beam_size * np.asarray(steps) * row_step


def active_rows(steps, batches, beam):
    """The rows of each step of each batch's search (`beam` per sentence still searched;
    a sentence of `s` steps takes part in steps `0..s-1`), all batches' steps in turn.

    Args:
        steps: `[sentences]` steps of each sentence's search (`sentence_steps`).
        batches: Lists of sentence indices, one per batch (every sentence in one).
        beam: Rows per sentence.
    """
    rows = []
    for batch in batches:
        batch_steps = np.asarray(steps)[list(batch)]
        rows += [beam * int(np.sum(batch_steps > t)) for t in range(int(batch_steps.max()))]
    return np.array(rows)


def _grid(counts):
    """The smallest of `counts`, its multiples by powers of two below the largest, and
    the largest: where a timing interpolated over `counts` is taken."""
    grid, count = [], int(np.min(counts))
    while count < np.max(counts):
        grid.append(count)
        count *= 2
    grid.append(int(np.max(counts)))
    return grid


def row_products_seconds(decoder, rows):
    """Seconds of one step's products at each of `rows` row counts: timed (the faster of
    XLA and graph mode) at the multiples of the smallest by powers of two up to the
    largest, and interpolated between them."""
    grid = _grid(rows)
    timed = [
        min(step_product_seconds(decoder, count, xla) for xla in (True, False)) for count in grid
    ]
    return np.interp(rows, grid, timed)


def _attention_matrices(model, source_length):
    """Stand-ins for one row's attention products over `source_length` positions: per
    attention block, the scores' `[embed, source]` and the context's `[source, embed]`
    (the encoder's keys and values; random, since a product's time does not depend on
    its values)."""
    rng = np.random.default_rng(0)
    return [
        rng.standard_normal(shape).astype(np.float32)
        for embed in _attention_widths(model)
        for shape in ((embed, source_length), (source_length, embed))
    ]


def shapes_batch1_seconds(model, steps, source_lengths, beam):
    """Per sentence, the products of its batch-1 search at the shapes it has, in seconds:
    each step's decoder products at `beam` rows together with the attention's over its
    source positions, and its encoder's products at its source positions; each timed
    (the faster of XLA and graph mode) at a grid of source lengths (`_grid`) and
    interpolated. The batch-1 floor of `timed_floors` counts the first at `beam` rows
    without the attention and the encoder's at the peak rate: small products run below
    it.

    Args:
        model: The `ConvS2S`.
        steps: `[sentences]` steps of each sentence's search.
        source_lengths: `[sentences]` source tokens of each, `</s>` included.
        beam: Rows per sentence and step.
    """
    decoder = _decoder_matrices(model.decoder)
    grid = _grid(source_lengths)
    step_seconds = [
        min(
            step_product_seconds(decoder + _attention_matrices(model, length), beam, xla)
            for xla in (True, False)
        )
        for length in grid
    ]
    encoder_seconds = row_products_seconds(_matrices(model.encoder), source_lengths)
    return np.asarray(steps) * np.interp(source_lengths, grid, step_seconds) + encoder_seconds


def floors(model, tokenizer, sentences, latency_sentences, batch_size, search_config):
    """The float32 floors of batch 1 (ms per sentence over the first `latency_sentences`)
    and of batches of `batch_size` (sentences per second over all `sentences`): of the
    matrix products alone, and of the products and the beam selection.

    Returns:
        A dict of the floors and what they are made of.
    """
    steps, source_lengths = sentence_steps(model, tokenizer, sentences, search_config)
    return timed_floors(
        model, steps, source_lengths, latency_sentences, batch_size, search_config.beam_size
    )


def timed_floors(
    model,
    steps,
    source_lengths,
    latency_sentences,
    batch_size,
    beam,
    batches=None,
    own_shapes=False,
):
    """`floors` of sentences whose searches take `steps` (`sentence_steps`), timed now:
    what a caller that times the floor repeatedly, between other measurements, calls.

    With `batches` (lists of every sentence's index, as the batches are sent), the floor
    of those batches at their searches' own rows: each step's decoder products timed at
    the rows the step has (`active_rows`; they shrink as sentences finish, and small
    products run below the peak rate), the encoder's and attention's products at the
    peak rate, and the selection as above
    (`floor_rows_selection_batch_sentences_per_sec`).

    With `own_shapes`, the batch-1 floor at the requests' own shapes: their products
    as `shapes_batch1_seconds` times them, and the selection as above
    (`floor_shapes_selection_batch1_ms`).
    """
    decoder = _decoder_matrices(model.decoder)
    step_seconds, select_seconds = batch1_step_seconds(model, beam)
    batched_step_seconds = step_product_seconds(decoder, batch_size * beam, xla=False)
    peak = max(
        square_product_flops_per_second(),
        batch_size * beam * _flops(decoder) / batched_step_seconds,
    )
    vocab = model.decoder.vocab_size
    # Per sentence and step, at batch_size sentences a step.
    batched_select_seconds = (
        min(selection_seconds(vocab, beam, batch_size, xla) for xla in (True, False)) / batch_size
    )
    encoder_flops, flops = search_flops(model, steps, source_lengths, beam)
    first = slice(0, latency_sentences)
    batch1_seconds = steps[first] * step_seconds + encoder_flops[first] / peak
    products_seconds = float(np.sum(flops)) / peak
    select_total_seconds = float(np.sum(steps)) * batched_select_seconds
    figures = {
        "floor_batch1_ms": round(1000.0 * float(np.mean(batch1_seconds)), 2),
        "floor_batch_sentences_per_sec": round(len(steps) / products_seconds, 2),
        "floor_selection_batch1_ms": round(
            1000.0 * float(np.mean(batch1_seconds + steps[first] * select_seconds)), 2
        ),
        "floor_selection_batch_sentences_per_sec": round(
            len(steps) / (products_seconds + select_total_seconds), 2
        ),
        "floor_step_selection_ms_batch1": round(1000.0 * select_seconds, 4),
        "floor_step_selection_ms_per_sentence_batch": round(1000.0 * batched_select_seconds, 4),
        "floor_mean_steps": round(float(np.mean(steps)), 2),
        "floor_step_products_ms_batch1": round(1000.0 * step_seconds, 4),
        "floor_peak_gflops": round(peak / 1e9, 1),
        "floor_decoder_weights_mb": round(_flops(decoder) * 2 / 1e6, 2),
        "floor_total_gflop": round(float(np.sum(flops)) / 1e9, 1),
    }
    if batches is not None:
        decoder_flops = beam * float(np.sum(steps)) * _flops(decoder)
        rows_seconds = (
            float(np.sum(row_products_seconds(decoder, active_rows(steps, batches, beam))))
            + (float(np.sum(flops)) - decoder_flops) / peak
            + select_total_seconds
        )
        figures["floor_rows_selection_batch_sentences_per_sec"] = round(
            len(steps) / rows_seconds, 2
        )
    if own_shapes:
        shapes_seconds = (
            shapes_batch1_seconds(model, steps[first], source_lengths[first], beam)
            + steps[first] * select_seconds
        )
        figures["floor_shapes_selection_batch1_ms"] = round(
            1000.0 * float(np.mean(shapes_seconds)), 2
        )
    return figures
