"""A decoder's vocabulary projection restricted to a shortlist of target ids, shared by
the model families (`select_outputs` of the decoder contract)."""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from convs2s_tf.layers.int8_kernel import Int8Kernel, kernel_product


class OutputSubset(NamedTuple):
    """The vocabulary projection restricted to some target ids (a shortlist).

    Attributes:
        kernel: `[width, columns]`, the projection's columns of those ids, in the
            compute dtype, or an `Int8Kernel` of them.
        bias: `[columns]`, their bias in the compute dtype, -inf for filler columns.
    """

    kernel: tf.Tensor | Int8Kernel
    bias: tf.Tensor

    def product(self, features: tf.Tensor) -> tf.Tensor:
        """`[rows, width]` features times `kernel`, without the bias: `[rows, columns]` in
        the compute dtype (float32 for an `Int8Kernel`)."""
        return kernel_product(features, self.kernel)


def select_columns(
    weights: tf.Tensor | Int8Kernel,
    vocabulary_axis: int,
    bias: tf.Tensor,
    ids: tf.Tensor,
    valid: tf.Tensor,
    dtype: tf.DType,
) -> OutputSubset:
    """The `OutputSubset` of target `ids` (`[columns]` int32; `valid` `[columns]` bool,
    False for filler columns) of a projection: `weights` are `[width, vocab]`
    (`vocabulary_axis` 1) or a tied token table `[vocab, width]` (axis 0), `bias` is
    `[vocab]`; `dtype` is the decoder's compute dtype. An `Int8Kernel` (`[width, vocab]`)
    gives one of its columns."""
    kernel: tf.Tensor | Int8Kernel
    if isinstance(weights, Int8Kernel):
        if vocabulary_axis != 1:
            raise ValueError("An Int8Kernel projection holds its vocabulary on axis 1.")
        kernel = Int8Kernel(tf.gather(weights.values, ids, axis=1), tf.gather(weights.scales, ids))
    else:
        kernel = tf.gather(tf.cast(weights, dtype), ids, axis=vocabulary_axis)
        if vocabulary_axis == 0:
            kernel = tf.transpose(kernel)
    bias = tf.gather(tf.cast(bias, dtype), ids)
    filler = tf.fill(tf.shape(bias), tf.constant(float("-inf"), dtype))
    return OutputSubset(kernel=kernel, bias=tf.where(valid, bias, filler))
