"""Token-level cross-entropy with label smoothing, as sums over non-pad tokens."""

import functools
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from convs2s_tf.models.families import TranslationModel

# Row counts handed to the XLA-compiled loss are rounded up to a multiple of this, so
# it compiles once per bucket (at most max_tokens / TOKEN_BUCKET shapes, each in well
# under a second) instead of once per batch; the padded rows cost ~1% more matmul.
TOKEN_BUCKET = 64


def bucketed_token_count(num_tokens: tf.Tensor) -> tf.Tensor:
    """`num_tokens` rounded up to a multiple of `TOKEN_BUCKET` (an int32 tensor)."""
    return (num_tokens + TOKEN_BUCKET - 1) // TOKEN_BUCKET * TOKEN_BUCKET


@functools.lru_cache(maxsize=None)
def _fused_loss_functions(
    label_smoothing: float,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """XLA-compiled forward and backward of the smoothed cross-entropy, per `eps`."""

    def constants(logits: tf.Tensor) -> tuple[float, float, float]:
        vocab_size = float(logits.shape[-1])
        eps_i = label_smoothing / (vocab_size - 1.0)
        return vocab_size, eps_i, 1.0 - label_smoothing - eps_i

    @tf.function(jit_compile=True, autograph=False)
    def forward(
        logits: tf.Tensor, bias: tf.Tensor, targets: tf.Tensor, weights: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
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

    @tf.function(jit_compile=True, autograph=False)
    def backward(
        logits: tf.Tensor,
        bias: tf.Tensor,
        targets: tf.Tensor,
        weights: tf.Tensor,
        log_normaliser: tf.Tensor,
        upstream: tf.Tensor,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        vocab_size, eps_i, target_weight = constants(logits)
        probabilities = tf.exp(tf.cast(logits, tf.float32) + bias - log_normaliser[:, None])
        on_target = tf.one_hot(targets, logits.shape[-1], on_value=target_weight, off_value=0.0)
        row_scale = (upstream * weights)[:, None]
        gradient = row_scale * (
            (target_weight + vocab_size * eps_i) * probabilities - eps_i - on_target
        )
        return tf.cast(gradient, logits.dtype), tf.reduce_sum(gradient, axis=0)

    return forward, backward


def fused_token_losses(
    logits: tf.Tensor,
    bias: tf.Tensor,
    targets: tf.Tensor,
    weights: tf.Tensor,
    label_smoothing: float = 0.0,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Summed training loss and NLL of `logits + bias`, in XLA-fused passes.

    Label smoothing follows the authors' implementation: per token
    `(1 - eps - eps_i) * nll + eps_i * sum_v(-log p_v)` with `eps_i = eps / (V - 1)`; the
    log-softmax is never materialised (`nll = lse - logit_y` and
    `sum_v log p_v = sum_v logit_v - V * lse`). Sums, not means, let the caller divide
    by the token count of the whole global batch, so an update does not depend on how
    the batch is split across replicas or accumulated over micro-batches.

    The logits come without their output bias: the bias add, the float32 cast, the row
    maximum and sums go into one XLA computation forwards, and the gradient (with the
    bias gradient as its column sum) into one backwards; one-hot targets are never
    materialised outside it. The matrix product stays outside XLA, whose CPU backend
    does not use the bfloat16 matrix instructions.
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
    def loss_fn(logits: tf.Tensor, bias: tf.Tensor) -> tuple[
        tuple[tf.Tensor, tf.Tensor],
        Callable[[tf.Tensor, tf.Tensor | None], tuple[tf.Tensor, tf.Tensor]],
    ]:
        loss_sum, nll_sum, log_normaliser = forward(logits, bias, targets, weights)

        def grad(upstream: tf.Tensor, _: tf.Tensor | None) -> tuple[tf.Tensor, tf.Tensor]:
            return backward(logits, bias, targets, weights, log_normaliser, upstream)

        return (loss_sum, tf.stop_gradient(nll_sum)), grad

    return loss_fn(logits, bias)


def batch_loss_sums(
    model: TranslationModel,
    batch: Mapping[str, tf.Tensor],
    label_smoothing: float,
    training: bool,
    static_shapes: bool = False,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The summed loss and NLL of `model` on `batch`, and its number of target tokens.

    Logits are computed at non-pad targets only (the output projection of padding would
    be wasted work), their row count rounded up to a `TOKEN_BUCKET` multiple.

    Args:
        model: A built model of any family (`convs2s_tf.models.families.TranslationModel`).
        batch: Dict of `[batch, time]` int32 `source`, `target_input` and `target` ids.
        label_smoothing: `eps`.
        training: Whether dropout is active.
        static_shapes: Score every position instead, padding weighing 0, so that shapes
            are known when an XLA-compiled step compiles.

    Returns:
        `(loss_sum, nll_sum, num_tokens)`, float32 scalars.
    """
    features = model.output_features(batch, training=training)
    pad_id = model.decoder.pad_id
    targets = batch["target"]
    if static_shapes:
        rows = tf.reshape(features, [-1, features.shape[-1]])
        targets = tf.reshape(targets, [-1])
        weights = tf.cast(tf.not_equal(targets, pad_id), tf.float32)
        num_tokens = tf.reduce_sum(weights)
    else:
        # gather_nd rather than boolean_mask: its gradient is one dense scatter, where
        # boolean_mask's is a segment sum, a visible part of a bfloat16 step. The extra rows
        # of the bucket repeat position (0, 0) and weigh 0.
        positions = tf.where(tf.not_equal(targets, pad_id))
        count = tf.shape(positions)[0]
        padding = bucketed_token_count(count) - count
        positions = tf.pad(positions, [[0, padding], [0, 0]])
        weights = tf.sequence_mask(count, count + padding, tf.float32)
        rows = tf.gather_nd(features, positions)
        targets = tf.gather_nd(targets, positions)
        num_tokens = tf.cast(count, tf.float32)
    logits, bias = model.unbiased_output_logits(rows)
    loss_sum, nll_sum = fused_token_losses(logits, bias, targets, weights, label_smoothing)
    return loss_sum, nll_sum, num_tokens
