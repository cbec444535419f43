"""Kernels stored as 8-bit integers with a scale per output column, for decoding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import tensorflow as tf

# Symmetric 8-bit range: the largest magnitude of a column (or row) maps to 127.
INT8_LIMIT = 127.0
# Scales are never zero: an all-zero column or row keeps a tiny one and stays zero.
_SMALLEST_SCALE = 1e-12


class Int8Kernel(NamedTuple):
    """A kernel `[..., in, out]` as int8 `values` and float32 `scales` (`[out]`): the
    float kernel is `values * scales`.

    `product(rows)` multiplies `[rows, in]` by it the way an 8-bit matrix unit does:
    each row is rounded to int8 by its own largest magnitude, the integer sums are taken,
    then scaled back by the row's and the column's scales. With int8 `values` (inside an
    XLA computation, where the product reaches the CPU's 8-bit units) the sums are int32;
    with the same values as float32 (`with_float_values()`, for graph mode, whose int8
    product is a generic loop) they are float32 sums of integers, exact while
    `127 * 127 * in < 2**24` (`in` up to 1,040), so both give the same result.

    Attributes:
        values: int8 (or integer-valued float32) tensor or variable, the kernel's shape.
        scales: float32 `[out]`, one per output column.

    Example:

    >>> kernel = Int8Kernel.quantize(tf.constant([[0.5, -1.0], [0.25, 2.0]]))
    >>> kernel.values.numpy().tolist()
    [[127, -64], [64, 127]]
    >>> [round(float(value), 3) for value in kernel.product(tf.constant([[1.0, 1.0]]))[0]]
    [0.752, 0.992]
    """

    values: tf.Tensor
    scales: tf.Tensor

    @classmethod
    def quantize(cls, kernel: tf.Tensor | np.ndarray) -> Int8Kernel:
        """`kernel` (float, `[..., out]`) rounded to int8 with a scale per output column."""
        kernel = np.asarray(kernel, np.float32)
        axes = tuple(range(kernel.ndim - 1))
        scales = np.maximum(np.abs(kernel).max(axis=axes), _SMALLEST_SCALE) / INT8_LIMIT
        values = np.clip(np.round(kernel / scales), -INT8_LIMIT, INT8_LIMIT).astype(np.int8)
        return cls(tf.constant(values), tf.constant(scales.astype(np.float32)))

    @property
    def shape(self) -> tf.TensorShape:
        """The kernel's shape."""
        return self.values.shape

    def dequantize(self, dtype: tf.DType | str = tf.float32) -> tf.Tensor:
        """The float kernel `values * scales` in `dtype`."""
        return tf.cast(tf.cast(self.values, tf.float32) * self.scales, dtype)

    def with_float_values(self) -> Int8Kernel:
        """The same kernel with its integer values held as float32 (graph mode's
        products: the same sums through float32 matrix kernels)."""
        return Int8Kernel(tf.cast(self.values, tf.float32), tf.convert_to_tensor(self.scales))

    def as_tensors(self) -> Int8Kernel:
        """The kernel with variables read as tensors."""
        return Int8Kernel(tf.convert_to_tensor(self.values), tf.convert_to_tensor(self.scales))

    def product(self, rows: tf.Tensor) -> tf.Tensor:
        """`rows` (`[..., in]` float32) times the kernel (flattened to `[in, out]`), in
        float32, with each row rounded to int8 by its largest magnitude."""
        values = self.values
        if values.shape.rank != 2:  # a convolution's `[width, in, out]`
            values = tf.reshape(values, [-1, values.shape[-1]])
        shape = tf.shape(rows)
        flat = tf.reshape(rows, [-1, tf.shape(values)[0]]) if rows.shape.rank != 2 else rows
        row_scales = (
            tf.maximum(tf.reduce_max(tf.abs(flat), axis=1, keepdims=True), _SMALLEST_SCALE)
            / INT8_LIMIT
        )
        rounded = tf.round(flat / row_scales)
        if values.dtype == tf.int8:
            sums = tf.raw_ops.BatchMatMulV3(x=tf.cast(rounded, tf.int8), y=values, Tout=tf.int32)
            sums = tf.cast(sums, tf.float32)
        else:
            sums = tf.matmul(rounded, values)
        outputs = sums * row_scales * self.scales
        if rows.shape.rank == 2:
            return outputs
        return tf.reshape(outputs, tf.concat([shape[:-1], tf.shape(values)[-1:]], axis=0))


def kernel_product(rows: tf.Tensor, kernel: tf.Tensor | Int8Kernel) -> tf.Tensor:
    """`rows` (`[rows, in]`) times `kernel` (`[in, out]`): `Int8Kernel.product` for an
    `Int8Kernel`, else a plain product in the rows' dtype."""
    if isinstance(kernel, Int8Kernel):
        return kernel.product(rows)
    return tf.matmul(rows, kernel)


def graph_mode_kernels(
    kernels: Sequence[tf.Tensor | tf.Variable | Int8Kernel] | None,
) -> list[tf.Tensor | tf.Variable | Int8Kernel] | None:
    """`kernels` for a search in graph mode: each `Int8Kernel` with float32 values
    (`Int8Kernel.with_float_values`), the others as they are."""
    if kernels is None:
        return None
    return [
        kernel.with_float_values() if isinstance(kernel, Int8Kernel) else kernel
        for kernel in kernels
    ]
