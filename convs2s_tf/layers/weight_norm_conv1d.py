"""Weight-normalised 1-D convolution with an incremental step for generation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers.folded_kernels import FoldedKernels, WeightNormFolding
from convs2s_tf.layers.int8_kernel import Int8Kernel

_PADDINGS = ("same", "causal", "valid")


@keras.saving.register_keras_serializable(package="convs2s_tf")
class WeightNormConv1D(WeightNormFolding, keras.layers.Layer):
    """A 1-D convolution over `[batch, time, channels]` with weight normalisation.

    The effective kernel is `W = g * v / ||v||`, the norm taken per output channel over
    the width and input axes; `g` starts at `||v||`, so `W == v` when built. The kernel
    layout is `[width, in, out]`, the layout of the authors' `ConvTBC`.

    Padding:
        * `"same"`: `(k - 1) // 2` zeros on the left and `k // 2` on the right, so even
          widths look one position further right than left (the ConvS2S encoder rule).
        * `"causal"`: `k - 1` zeros on the left; output `i` sees inputs `i-k+1 .. i` (the
          decoder). Only causal layers support `step`.
        * `"valid"`: no padding.

    Incremental use (generation): `step(x_t, window)` consumes one new position `x_t`
    (`[batch, in]`) and the cached previous `k - 1` inputs `window` (`[batch, k-1, in]`,
    zeros before the first position), applies the kernel to that window with one matrix
    product and returns `(y_t, new_window)`. It equals the causal convolution at that
    position without recomputing earlier ones. Both `call` and `step` take an optional
    `kernels` (`FoldedKernels`, inference): the layer computes with its folded kernel
    there (in `step`, an `Int8Kernel`'s product rounds the rows to int8).

    Args:
        filters: Output channels.
        kernel_size: Convolution width `k`.
        padding: `"same"`, `"causal"` or `"valid"`.
        stddev: Standard deviation of the normal distribution `v` is drawn from; ConvS2S
            uses `sqrt(4 * (1 - dropout) / (k * in))` for convolutions feeding a GLU.
            `None` means `sqrt(1 / (k * in))`.
        use_bias: Whether to add a bias (zero at construction).
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> conv = WeightNormConv1D(6, 3, padding="causal")
    >>> conv(tf.ones([2, 7, 4])).shape
    TensorShape([2, 7, 6])
    >>> window = conv.initial_window(batch_size=2, input_dim=4)
    >>> y_t, window = conv.step(tf.ones([2, 4]), window)
    >>> y_t.shape, window.shape
    (TensorShape([2, 6]), TensorShape([2, 2, 4]))
    """

    def __init__(
        self,
        filters: int,
        kernel_size: int,
        padding: str = "same",
        stddev: float | None = None,
        use_bias: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if filters <= 0 or kernel_size <= 0:
            raise ValueError(
                f"WeightNormConv1D needs positive filters and kernel_size, got "
                f"filters={filters}, kernel_size={kernel_size}."
            )
        if padding not in _PADDINGS:
            raise ValueError(f"padding must be one of {_PADDINGS}, got {padding!r}.")
        self.filters = int(filters)
        self.kernel_size = int(kernel_size)
        self.padding = padding
        self.stddev = stddev
        self.use_bias = use_bias

    def build(self, input_shape: Sequence[Any]) -> None:
        input_dim = int(input_shape[-1])
        stddev = (
            self.stddev
            if self.stddev is not None
            else (1.0 / (self.kernel_size * input_dim)) ** 0.5
        )
        self.kernel_v = self.add_weight(
            name="kernel_v",
            shape=(self.kernel_size, input_dim, self.filters),
            initializer=keras.initializers.RandomNormal(stddev=stddev),
        )
        # g = ||v|| per output channel at construction, so the effective kernel equals v.
        self.kernel_g = self.add_weight(
            name="kernel_g",
            shape=(self.filters,),
            initializer=lambda shape, dtype=None: tf.norm(
                tf.reshape(self.kernel_v.value, [-1, self.filters]), axis=0
            ),
        )
        self.bias = (
            self.add_weight(name="bias", shape=(self.filters,), initializer="zeros")
            if self.use_bias
            else None
        )

    @property
    def kernel(self) -> tf.Tensor:
        """The effective kernel `g * v / ||v||`, shape `[width, in, filters]`, in the
        variable dtype."""
        v = tf.convert_to_tensor(self.kernel_v.value)
        norm = tf.norm(tf.reshape(v, [-1, self.filters]), axis=0)
        return v * (tf.convert_to_tensor(self.kernel_g.value) / norm)

    def _paddings(self) -> tuple[int, int]:
        k = self.kernel_size
        if self.padding == "same":
            return (k - 1) // 2, k // 2
        if self.padding == "causal":
            return k - 1, 0
        return 0, 0

    def call(self, inputs: tf.Tensor, kernels: FoldedKernels | None = None) -> tf.Tensor:
        kernel = self.compute_kernel(kernels)
        left, right = self._paddings()
        if left or right:
            inputs = tf.pad(inputs, [[0, 0], [left, right], [0, 0]])
        if self.kernel_size == 1:
            # A width-1 convolution is a position-wise matrix product.
            outputs = tf.tensordot(inputs, kernel[0], axes=1)
        else:
            outputs = _conv1d_valid(inputs, kernel)
            # TF's conv1d returns a wrongly shaped tensor for an empty batch (as a replica
            # may get); restating the shape is free and keeps the empty case valid.
            shape = tf.shape(inputs)
            outputs = tf.reshape(outputs, [shape[0], shape[1] - self.kernel_size + 1, self.filters])
        if self.bias is not None:
            outputs = outputs + tf.cast(self.bias, self.compute_dtype)
        return outputs

    def initial_window(
        self,
        batch_size: int | tf.Tensor,
        input_dim: int | None = None,
        dtype: tf.DType | str | None = None,
    ) -> tf.Tensor:
        """Zeros standing for the `k - 1` positions before the first one."""
        input_dim = input_dim if input_dim is not None else self.kernel_v.shape[1]
        return tf.zeros([batch_size, self.kernel_size - 1, input_dim], dtype or self.compute_dtype)

    def step(
        self, inputs: tf.Tensor, window: tf.Tensor, kernels: FoldedKernels | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Applies the causal convolution to one new position.

        Args:
            inputs: `[batch, in]`, the input at the new position.
            window: `[batch, k - 1, in]`, the previous `k - 1` inputs, oldest first.
            kernels: Optional `FoldedKernels` holding this layer's folded kernel.

        Returns:
            `(outputs, new_window)`: `[batch, filters]` and the window shifted by one.
        """
        if self.padding != "causal":
            raise ValueError("step() is only defined for padding='causal'.")
        if not self.built:
            self.build(tf.TensorShape([None, None, inputs.shape[-1]]))
        inputs = tf.cast(inputs, self.compute_dtype)
        full_window = tf.concat([tf.cast(window, self.compute_dtype), inputs[:, None, :]], axis=1)
        # One matrix product over the flattened window: [batch, k*in] x [k*in, filters].
        rows = tf.reshape(full_window, [tf.shape(full_window)[0], -1])
        folded = kernels.kernel(self) if kernels is not None else None
        if isinstance(folded, Int8Kernel):
            outputs = folded.product(rows)
        else:
            kernel = self.compute_kernel(kernels)
            outputs = tf.matmul(rows, tf.reshape(kernel, [-1, self.filters]))
        if self.bias is not None:
            outputs = outputs + tf.cast(self.bias, self.compute_dtype)
        return outputs, full_window[:, 1:, :]

    def compute_output_shape(
        self, input_shape: Sequence[int | None]
    ) -> tuple[int | None, int | None, int]:
        left, right = self._paddings()
        length = input_shape[1]
        if length is not None:
            length = length + left + right - self.kernel_size + 1
        return (input_shape[0], length, self.filters)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "kernel_size": self.kernel_size,
                "padding": self.padding,
                "stddev": self.stddev,
                "use_bias": self.use_bias,
            }
        )
        return config


@tf.custom_gradient
def _conv1d_valid(
    inputs: tf.Tensor, kernel: tf.Tensor
) -> tuple[tf.Tensor, Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]]:
    """`tf.nn.conv1d(inputs, kernel, 1, "VALID")` whose kernel gradient is plain matmuls.

    oneDNN's filter gradient of a 1-D convolution (Conv2DBackpropFilter) costs well
    over the forward pass on CPU; tap `i`'s gradient is `sum_t x_{t+i}^T dy_t`, one
    `[in, tokens] x [tokens, filters]` matmul per tap, the forward pass' cost in all.
    The input gradient stays oneDNN's transposed convolution.
    """
    outputs = tf.nn.conv1d(inputs, kernel, stride=1, padding="VALID")

    def gradient(upstream: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        kernel_size, input_dim, filters = kernel.shape
        # Restated from the inputs: oneDNN gives an empty batch a wrongly shaped output.
        shape = tf.shape(inputs)
        length = shape[1] - kernel_size + 1
        upstream = tf.reshape(upstream, [shape[0], length, filters])
        inputs_gradient = tf.nn.conv1d_transpose(
            upstream, kernel, output_shape=shape, strides=1, padding="VALID"
        )
        # One [in, tokens] x [tokens, filters] product per tap: the same work as one
        # product over the concatenated windows, without copying them into one tensor.
        flat_upstream = tf.reshape(upstream, [-1, filters])
        kernel_gradient = tf.stack(
            [
                tf.matmul(
                    tf.reshape(inputs[:, i : i + length], [-1, input_dim]),
                    flat_upstream,
                    transpose_a=True,
                )
                for i in range(kernel_size)
            ]
        )
        return inputs_gradient, kernel_gradient

    return outputs, gradient
