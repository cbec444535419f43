"""Reference losses, the oracles the training loss is tested against.

The training step uses the XLA-fused `convs2s_tf.training.losses.fused_token_losses`;
these compute the same smoothed cross-entropy in plain TensorFlow ops (with a fused
gradient of their own), for logits of any shape with padding, so tests can compare.
"""

import tensorflow as tf

from convs2s_tf.vocabulary import PAD_ID


def _smoothed_cross_entropy(logits, targets, label_smoothing):
    """Per-token `(loss, nll)` for `[n, vocab]` float32 logits, with a custom gradient.

    `d loss / d logits = softmax * (a + V * eps_i) - a * onehot(y) - eps_i` with
    `a = 1 - eps - eps_i`, written out rather than left to autodiff (the tests check
    the two agree).
    """
    vocab_size = tf.cast(tf.shape(logits)[-1], tf.float32)
    eps_i = label_smoothing / (vocab_size - 1.0)
    target_weight = 1.0 - label_smoothing - eps_i
    positions = tf.stack([tf.range(tf.shape(targets)[0]), tf.cast(targets, tf.int32)], axis=1)

    @tf.custom_gradient
    def loss_fn(logits):
        row_max = tf.stop_gradient(tf.reduce_max(logits, axis=-1, keepdims=True))
        exponentials = tf.exp(logits - row_max)
        exp_sum = tf.reduce_sum(exponentials, axis=-1)
        log_normaliser = row_max[:, 0] + tf.math.log(exp_sum)
        nll = log_normaliser - tf.gather_nd(logits, positions)
        smooth = vocab_size * log_normaliser - tf.reduce_sum(logits, axis=-1)
        loss = target_weight * nll + eps_i * smooth

        def grad(upstream):
            scale = upstream * (target_weight + vocab_size * eps_i) / exp_sum
            dense = exponentials * scale[:, None] - (upstream * eps_i)[:, None]
            return tf.tensor_scatter_nd_sub(dense, positions, upstream * target_weight)

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
    mask = tf.not_equal(targets, pad_id)
    # Only real tokens are scored: gathering them first keeps padding out of the
    # [tokens, vocab] work entirely (gather_nd: its gradient is one dense scatter).
    positions = tf.where(mask)
    return flat_token_losses(
        tf.gather_nd(logits, positions), tf.gather_nd(targets, positions), label_smoothing
    )


def flat_token_losses(logits, targets, label_smoothing=0.0):
    """`token_losses` for logits of real tokens only: `[tokens, vocab]` and `[tokens]`."""
    loss, nll = _smoothed_cross_entropy(
        tf.cast(logits, tf.float32), targets, float(label_smoothing)
    )
    num_tokens = tf.cast(tf.shape(targets)[0], tf.float32)
    return tf.reduce_sum(loss), tf.reduce_sum(nll), num_tokens
