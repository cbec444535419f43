"""Token-level cross-entropy with label smoothing, as sums over non-pad tokens."""

import tensorflow as tf

from convs2s_tf.vocabulary import PAD_ID


def token_losses(logits, targets, label_smoothing=0.0, pad_id=PAD_ID):
    """Summed training loss, summed NLL and the number of non-pad target tokens.

    Sums (not means) let the caller divide by the token count of the whole global
    batch, so the result does not depend on how the batch is split across replicas or
    accumulated over micro-batches. Label smoothing follows the authors'
    implementation: `(1 - eps - eps_i) * nll + eps_i * sum_v(-log p_v)` with
    `eps_i = eps / (V - 1)`. The log-softmax is never materialised: `nll = lse - logit_y`
    and `sum_v log p_v = sum_v logit_v - V * lse`.

    Args:
        logits: `[batch, time, vocab]` float32.
        targets: `[batch, time]` int token ids, `pad_id` where there is no token.
        label_smoothing: `eps`.
        pad_id: Padding id, excluded from every sum.

    Returns:
        `(loss_sum, nll_sum, num_tokens)`, float32 scalars.
    """
    logits = tf.cast(logits, tf.float32)
    mask = tf.cast(tf.not_equal(targets, pad_id), tf.float32)
    # Pads are replaced by a valid id so the gather below stays in range.
    safe_targets = tf.where(tf.equal(targets, pad_id), tf.zeros_like(targets), targets)
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=safe_targets, logits=logits)
    nll_sum = tf.reduce_sum(nll * mask)
    loss_sum = nll_sum
    if label_smoothing:
        vocab_size = tf.cast(tf.shape(logits)[-1], tf.float32)
        log_normaliser = tf.reduce_logsumexp(logits, axis=-1)
        smooth = vocab_size * log_normaliser - tf.reduce_sum(logits, axis=-1)
        eps_i = label_smoothing / (vocab_size - 1.0)
        per_token = (1.0 - label_smoothing - eps_i) * nll + eps_i * smooth
        loss_sum = tf.reduce_sum(per_token * mask)
    return loss_sum, nll_sum, tf.reduce_sum(mask)
