"""Token-level cross-entropy with label smoothing, as sums over non-pad tokens."""

import functools

import tensorflow as tf

from convs2s_tf.vocabulary import PAD_ID


def _smoothed_cross_entropy(logits, targets, label_smoothing):
    """Per-token `(loss, nll)` for `[n, vocab]` float32 logits, with a fused gradient.

    `d loss / d logits = softmax * (a + V * eps_i) - a * onehot(y) - eps_i` with
    `a = 1 - eps - eps_i`. The `[n, vocab]` logits are the largest tensor of a step and
    every elementwise pass over them costs milliseconds, so passes are counted: the
    forward pass takes the row maximum, `exp(logits - max)` and two row sums, and keeps
    the exponentials; the backward pass scales them by `upstream * (a + V eps_i) / sum`,
    subtracts `upstream * eps_i` and takes `upstream * a` off at the targets with a
    scatter (no dense one-hot). Letting TensorFlow differentiate the composite took
    about twice as many passes.
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
    """`token_losses` for logits of real tokens only: `[tokens, vocab]` and `[tokens]`.

    The training step computes logits at non-pad positions only and calls this
    directly: masking again would gather (and, backwards, scatter) the largest tensor
    of the step for nothing.
    """
    loss, nll = _smoothed_cross_entropy(
        tf.cast(logits, tf.float32), targets, float(label_smoothing)
    )
    num_tokens = tf.cast(tf.shape(targets)[0], tf.float32)
    return tf.reduce_sum(loss), tf.reduce_sum(nll), num_tokens


# Row counts handed to the XLA-compiled loss are rounded up to a multiple of this, so
# it compiles once per bucket (at most max_tokens / TOKEN_BUCKET shapes, each in well
# under a second) instead of once per batch; the padded rows cost ~1% more matmul.
TOKEN_BUCKET = 64


def bucketed_token_count(num_tokens):
    """`num_tokens` rounded up to a multiple of `TOKEN_BUCKET` (an int32 tensor)."""
    return (num_tokens + TOKEN_BUCKET - 1) // TOKEN_BUCKET * TOKEN_BUCKET


@functools.lru_cache(maxsize=None)
def _fused_loss_functions(label_smoothing):
    """XLA-compiled forward and backward of the smoothed cross-entropy, per `eps`."""

    def constants(logits):
        vocab_size = float(logits.shape[-1])
        eps_i = label_smoothing / (vocab_size - 1.0)
        return vocab_size, eps_i, 1.0 - label_smoothing - eps_i

    @tf.function(jit_compile=True)
    def forward(logits, bias, targets, weights):
        vocab_size, eps_i, target_weight = constants(logits)
        shifted = tf.cast(logits, tf.float32) + bias
        row_max = tf.reduce_max(shifted, axis=-1, keepdims=True)
        log_normaliser = row_max[:, 0] + tf.math.log(
            tf.reduce_sum(tf.exp(shifted - row_max), axis=-1)
        )
        nll = log_normaliser - tf.gather(shifted, targets, batch_dims=1)
        smooth = vocab_size * log_normaliser - tf.reduce_sum(shifted, axis=-1)
        loss = target_weight * nll + eps_i * smooth
        return tf.reduce_sum(loss * weights), tf.reduce_sum(nll * weights), log_normaliser

    @tf.function(jit_compile=True)
    def backward(logits, bias, targets, weights, log_normaliser, upstream):
        vocab_size, eps_i, target_weight = constants(logits)
        probabilities = tf.exp(tf.cast(logits, tf.float32) + bias - log_normaliser[:, None])
        on_target = tf.one_hot(targets, logits.shape[-1], on_value=target_weight, off_value=0.0)
        row_scale = (upstream * weights)[:, None]
        gradient = row_scale * (
            (target_weight + vocab_size * eps_i) * probabilities - eps_i - on_target
        )
        return tf.cast(gradient, logits.dtype), tf.reduce_sum(gradient, axis=0)

    return forward, backward


def fused_token_losses(logits, bias, targets, weights, label_smoothing=0.0):
    """Summed training loss and NLL of `logits + bias`, in XLA-fused passes.

    The same loss as `flat_token_losses` (whose docstring gives the formula), for
    logits still without their output bias: the bias add, the float32 cast, the row
    maximum and sums go into one XLA computation forwards, and the gradient (with the
    bias gradient as its column sum) into one backwards; one-hot targets are never
    materialised outside it. On 2 CPU cores this cut the loss's share of a bfloat16
    step from ~60 ms to ~35 ms ([3,500, 8,000] logits); the matrix product stays
    outside XLA, whose CPU backend does not use the bfloat16 matrix instructions.
    Rows are counted by `weights` (1 for a token, 0 for the padding rows that keep
    the row count on `TOKEN_BUCKET` multiples).

    Args:
        logits: `[rows, vocab]` logits without the output bias, any float dtype.
        bias: `[vocab]` float32 output bias.
        targets: `[rows]` int target ids.
        weights: `[rows]` float32, 1 for a token and 0 for a padding row.
        label_smoothing: `eps`.

    Returns:
        `(loss_sum, nll_sum)`, float32 scalars; gradients flow to `logits` and `bias`.
    """
    forward, backward = _fused_loss_functions(float(label_smoothing))
    targets = tf.cast(targets, tf.int32)

    @tf.custom_gradient
    def loss_fn(logits, bias):
        loss_sum, nll_sum, log_normaliser = forward(logits, bias, targets, weights)

        def grad(upstream, _):
            return backward(logits, bias, targets, weights, log_normaliser, upstream)

        return (loss_sum, tf.stop_gradient(nll_sum)), grad

    return loss_fn(logits, bias)
