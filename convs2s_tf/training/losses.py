"""Token-level cross-entropy with label smoothing, as sums over non-pad tokens."""

import tensorflow as tf

from convs2s_tf.vocabulary import PAD_ID


def _smoothed_cross_entropy(logits, targets, label_smoothing):
    """Per-token `(loss, nll)` for `[n, vocab]` float32 logits, with a fused gradient.

    The forward pass needs one log-sum-exp; the backward pass one softmax:
    `d loss / d logits = softmax * (a + V * eps_i) - a * onehot(y) - eps_i` with
    `a = 1 - eps - eps_i`. Letting TensorFlow differentiate the composite instead costs
    two more passes over the `[n, vocab]` logits, the largest tensor of a step.
    """
    vocab_size = tf.cast(tf.shape(logits)[-1], tf.float32)
    eps_i = label_smoothing / (vocab_size - 1.0)
    target_weight = 1.0 - label_smoothing - eps_i

    @tf.custom_gradient
    def loss_fn(logits):
        log_normaliser = tf.reduce_logsumexp(logits, axis=-1)
        nll = log_normaliser - tf.gather(logits, targets, batch_dims=1)
        smooth = vocab_size * log_normaliser - tf.reduce_sum(logits, axis=-1)
        loss = target_weight * nll + eps_i * smooth

        def grad(upstream):
            softmax = tf.exp(logits - log_normaliser[:, None])
            one_hot = tf.one_hot(targets, tf.shape(logits)[-1], dtype=logits.dtype)
            local = softmax * (target_weight + vocab_size * eps_i) - target_weight * one_hot
            return upstream[:, None] * (local - eps_i)

        return tf.stack([loss, tf.stop_gradient(nll)], axis=0), lambda up: grad(up[0])

    losses = loss_fn(logits)
    return losses[0], losses[1]


def token_losses(logits, targets, label_smoothing=0.0, pad_id=PAD_ID):
    """Summed training loss, summed NLL and the number of non-pad target tokens.

    Sums (not means) let the caller divide by the token count of the whole global
    batch, so the result does not depend on how the batch is split across replicas or
    accumulated over micro-batches. Label smoothing follows the authors'
    implementation: `(1 - eps - eps_i) * nll + eps_i * sum_v(-log p_v)` with
    `eps_i = eps / (V - 1)`. The log-softmax is never materialised: `nll = lse - logit_y`
    and `sum_v log p_v = sum_v logit_v - V * lse`.

    Args:
        logits: `[..., vocab]` float32 (e.g. `[batch, time, vocab]`, or `[tokens, vocab]`
            for logits computed at non-pad positions only).
        targets: `[...]` int token ids, `pad_id` where there is no token.
        label_smoothing: `eps`.
        pad_id: Padding id, excluded from every sum.

    Returns:
        `(loss_sum, nll_sum, num_tokens)`, float32 scalars.
    """
    logits = tf.cast(logits, tf.float32)
    vocab_size = tf.shape(logits)[-1]
    mask = tf.not_equal(targets, pad_id)
    # Only real tokens are scored: flattening and masking first keeps padding out of the
    # [tokens, vocab] work entirely.
    flat_logits = tf.boolean_mask(tf.reshape(logits, [-1, vocab_size]), tf.reshape(mask, [-1]))
    flat_targets = tf.boolean_mask(tf.reshape(targets, [-1]), tf.reshape(mask, [-1]))
    loss, nll = _smoothed_cross_entropy(flat_logits, flat_targets, float(label_smoothing))
    num_tokens = tf.cast(tf.shape(flat_targets)[0], tf.float32)
    return tf.reduce_sum(loss), tf.reduce_sum(nll), num_tokens
