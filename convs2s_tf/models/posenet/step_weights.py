"""The weights of PoseNet's decoding step, read once per search, and the row operations
that use them.

A decoder step of PoseNet runs about forty dense maps and thirty-six layer norms on a few
rows each, inside the search's loop. Through Keras layers each map reads its two
variables and, on `[rows, 1, d]` inputs, reshapes around a tensordot; the step held about
1,350 operations, and at a few rows each costs its launch more than its arithmetic. A
step instead takes `[rows, d]` rows and weights read (and cast) once, where the search
is traced (`PoseNetDecoder.read_step_weights`), so the loop reads no variable. The
results equal the Keras layers' bit for bit: the same products and the same formula for
the norm.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
import tensorflow as tf

from convs2s_tf.models.posenet.layer_norm import normalize


class DenseWeights(NamedTuple):
    """A dense map's kernel `[inputs, outputs]` and bias, in the compute dtype."""

    kernel: tf.Tensor
    bias: tf.Tensor


class NormWeights(NamedTuple):
    """A layer norm's scale and offset (float32, as Keras computes the norm) and epsilon."""

    gamma: tf.Tensor
    beta: tf.Tensor
    epsilon: float


def read_variable(variable: keras.Variable, dtype: Any) -> tf.Tensor:
    """`variable`'s value now, in `dtype` (a tensor: `tf.cast` alone would hand a
    variable of that dtype on as the variable, to be read wherever it is used)."""
    return tf.cast(tf.convert_to_tensor(variable), dtype)


def read_dense(dense: keras.layers.Dense) -> DenseWeights:
    """The weights of Keras `dense` (with a bias, no activation) in its compute dtype."""
    dtype = dense.compute_dtype
    return DenseWeights(read_variable(dense.kernel, dtype), read_variable(dense.bias, dtype))


def read_norm(norm: keras.layers.LayerNormalization) -> NormWeights:
    """The weights of Keras `norm` (over the last axis, centred and scaled)."""
    gamma, beta = (read_variable(v, tf.float32) for v in (norm.gamma, norm.beta))
    return NormWeights(gamma, beta, norm.epsilon)


def dense_rows(rows: tf.Tensor, weights: DenseWeights) -> tf.Tensor:
    """`rows @ kernel + bias` of `[rows, inputs]` (Keras `Dense`'s product and sum)."""
    return tf.matmul(rows, weights.kernel) + weights.bias


def norm_rows(rows: tf.Tensor, weights: NormWeights) -> tf.Tensor:
    """The layer norm of `[rows, d]` over `d`, in float32 and back to the rows' dtype:
    the `LayerNorm` layer's (and Keras') formula, operation for operation."""
    return normalize(rows, weights.gamma, weights.beta, weights.epsilon)
