"""The first part of a search step: each hypothesis' best next tokens.

Log-probabilities follow the authors' implementation: a float32 log-softmax of the
logits in which `<pad>` is never chosen, `<unk>` loses `unk_penalty`, `</s>` is forbidden
before `min_length` tokens and is the only choice once a sentence reaches its maximum
length, and a NaN counts as -inf. The log-softmax is never materialised over the
vocabulary: candidates come from the raw logits, and only they are normalised by the
log-sum-exp.
"""

import math

import tensorflow as tf

from convs2s_tf.decoding.step_constants import NEG_INF, StepConstants
from convs2s_tf.vocabulary import EOS_ID


def _chunk_size(vocab_size: int, k: int) -> int:
    """Columns per chunk of the two-pass top-k: a divisor of `vocab_size` (no padding
    copy) near `1.5 sqrt(vocab_size / k)`, which keeps both passes short (`vocab_size /
    chunk` maxima, then `k * chunk` values; docs/performance.md has the measurement)."""
    preferred = max(8, round(1.5 * math.sqrt(vocab_size / k)))
    divisors = [c for c in range(preferred // 2, 2 * preferred + 1) if vocab_size % c == 0]
    return min(divisors, key=lambda c: abs(c - preferred)) if divisors else preferred


def top_k_with_special_bias(
    logits: tf.Tensor, special_bias: tf.Tensor, k: int, chunk: int | None = None
) -> tuple[tf.Tensor, tf.Tensor]:
    """`tf.math.top_k(logits + bias, k)` for a bias on the first few ids only, in two passes.

    The columns are cut into chunks of `chunk`. Every chunk holding one of the `k`
    largest values has a maximum at least as large as the k-th value, and at most `k`
    chunks do, so the `k` largest values lie in the `k` chunks with the largest maxima:
    a top-k over the chunk maxima, then over the `k * chunk` values of those chunks,
    gives the full top-k. Both passes are small (`vocabulary / chunk` maxima, then
    `k * chunk` values per row) where `TopKV2` would rank all `vocabulary` columns.

    Args:
        logits: `[rows, vocabulary]` float32.
        special_bias: `[n]` float32 added to columns `0..n-1` (`n <= chunk`): the special
            tokens' adjustments; every other column is taken as it is.
        k: Values per row.
        chunk: Columns per chunk; default a divisor of the vocabulary size (`_chunk_size`).

    Returns:
        `(values, ids)`, `[rows, k]` each, largest first.
    """
    values, ids, _ = _top_k_and_row_max(logits, special_bias, k, chunk)
    return values, ids


def _top_k_and_row_max(
    logits: tf.Tensor, special_bias: tf.Tensor, k: int, chunk: int | None = None
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`top_k_with_special_bias` and each row's maximum of the unbiased `logits`
    (`[rows, 1]`), taken from the chunk maxima the top-k computes anyway."""
    vocab_size = logits.shape[-1]
    num_special = special_bias.shape[0]
    if vocab_size is None:
        # A shortlist's columns, known only when the search runs.
        return _plain_top_k_and_row_max(logits, special_bias, k)
    chunk = chunk or _chunk_size(vocab_size, k)
    if num_special > chunk:
        raise ValueError(f"The bias covers {num_special} columns, more than a chunk ({chunk}).")
    num_chunks = -(-vocab_size // chunk)
    if num_chunks <= k:
        return _plain_top_k_and_row_max(logits, special_bias, min(k, vocab_size))
    bias = tf.pad(special_bias, [[0, num_chunks * chunk - num_special]])
    rows = tf.shape(logits)[0]
    if num_chunks * chunk != vocab_size:
        logits = tf.pad(
            logits, [[0, 0], [0, num_chunks * chunk - vocab_size]], constant_values=NEG_INF
        )
    chunks = tf.reshape(logits, [rows, num_chunks, chunk])
    raw_max = tf.reduce_max(chunks, axis=-1)
    # Only the first chunk carries a bias: its maximum is recomputed with it.
    first_max = tf.reduce_max(chunks[:, 0] + bias[:chunk], axis=-1, keepdims=True)
    chunk_max = tf.concat([first_max, raw_max[:, 1:]], axis=1)
    _, best_chunks = tf.math.top_k(chunk_max, k=k)
    # In id order, so that equal values resolve to the lowest id, as a top-k over the
    # whole row does, whatever the chunk size (bfloat16 logits tie often).
    best_chunks = tf.sort(best_chunks, axis=-1)
    bias_chunks = tf.reshape(bias, [num_chunks, chunk])
    selected = tf.gather(chunks, best_chunks, batch_dims=1) + tf.gather(bias_chunks, best_chunks)
    values, positions = tf.math.top_k(tf.reshape(selected, [rows, k * chunk]), k=k)
    ids = tf.gather(best_chunks, positions // chunk, batch_dims=1) * chunk + positions % chunk
    return values, ids, tf.reduce_max(raw_max, axis=-1, keepdims=True)


def _plain_top_k_and_row_max(
    logits: tf.Tensor, special_bias: tf.Tensor, k: int
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`_top_k_and_row_max` as one top-k over the whole row."""
    bias = tf.pad(special_bias, [[0, tf.shape(logits)[-1] - special_bias.shape[0]]])
    values, ids = tf.math.top_k(logits + bias, k=k)
    return values, ids, tf.reduce_max(logits, axis=-1, keepdims=True)


def _log_normaliser(logits: tf.Tensor, row_max: tf.Tensor) -> tf.Tensor:
    """`tf.reduce_logsumexp(logits, -1, keepdims=True)` given each row's maximum: the
    same operations on the same values, without a pass for the maximum."""
    finite_max = tf.where(tf.math.is_finite(row_max), row_max, tf.zeros_like(row_max))
    total = tf.reduce_sum(tf.exp(logits - finite_max), axis=-1, keepdims=True)
    return tf.math.log(total) + finite_max


def candidates(
    constants: StepConstants, logits: tf.Tensor, step: tf.Tensor, max_lengths: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Each hypothesis' `constants.per_row` best next tokens and their log-probabilities.

    Args:
        constants: The search's `StepConstants`.
        logits: `[sentences * beam_size, vocabulary]` float32 logits of the next token,
            `beam_size` consecutive rows per sentence.
        step: Scalar int32, the number of tokens each hypothesis holds.
        max_lengths: `[sentences]` int32 maximum output lengths (tokens before `</s>`).

    Returns:
        `(log_probs, ids)`, `[sentences * beam_size, per_row]` each, best first. A
        hypothesis at its sentence's maximum length has one candidate, `</s>`; the
        others' log-probabilities are -inf.
    """
    step_bias = tf.where(
        step < constants.min_length,
        constants.special_bias(allow_eos=False),
        constants.special_bias(allow_eos=True),
    )
    per_row = constants.per_row

    def search(logits: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        top_logits, top_ids, row_max = _top_k_and_row_max(logits, step_bias, per_row)
        eos_logit = logits[:, EOS_ID : EOS_ID + 1] + step_bias[EOS_ID]
        return top_logits, top_ids, _log_normaliser(logits, row_max), eos_logit

    def without_nan(logits: tf.Tensor) -> tf.Tensor:
        return tf.where(tf.math.is_nan(logits), tf.cast(NEG_INF, logits.dtype), logits)

    # A NaN log-probability counts as -inf, as in fairseq. XLA fuses the replacement into
    # the passes that read the logits; in graph mode it would be two passes of its own,
    # so there a row holding a NaN, which has a NaN normaliser, has the rare step that
    # has one searched again without them.
    if constants.xla:
        found = search(without_nan(logits))
    else:
        found = search(logits)
        found = tf.cond(
            tf.reduce_any(tf.math.is_nan(found[2])),
            lambda: search(without_nan(logits)),
            lambda: found,
        )
    top_logits, top_ids, normaliser, eos_logit = found
    force_eos = step >= tf.repeat(max_lengths, constants.beam_size)
    rows = tf.shape(logits)[0]
    forced_logits = tf.concat([eos_logit, tf.fill([rows, per_row - 1], NEG_INF)], axis=1)
    forced_ids = tf.concat([tf.fill([rows, 1], EOS_ID), top_ids[:, 1:]], axis=1)
    top_logits = tf.where(force_eos[:, None], forced_logits, top_logits)
    top_ids = tf.where(force_eos[:, None], forced_ids, top_ids)
    return top_logits - normaliser, top_ids
