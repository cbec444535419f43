"""Weight-normalised dense layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.layers.folded_kernels import FoldedKernels, WeightNormFolding
from convs2s_tf.layers.int8_kernel import Int8Kernel


@keras.saving.register_keras_serializable(package="convs2s_tf")
class WeightNormDense(WeightNormFolding, keras.layers.Layer):
    """A dense layer with weight normalisation (Salimans & Kingma, 2016).

    The effective kernel is `W = g * v / ||v||`, the norm taken per output unit over the
    input axis. `v` and `g` are the trained variables; `g` starts at `||v||`, so `W == v`
    when the layer is built. This is the parametrisation ConvS2S uses for every linear
    map, and the one of the authors' implementation (`weight_v`, `weight_g`).

    Args:
        units: Output width.
        stddev: Standard deviation of the normal distribution `v` is drawn from. ConvS2S
            uses `sqrt((1 - dropout) / in)` after a dropout and `sqrt(1 / in)` otherwise;
            `None` means `sqrt(1 / in)`.
        use_bias: Whether to add a bias (zero at construction).
        **kwargs: Standard `keras.layers.Layer` arguments (name, dtype, ...).

    Call arguments:
        inputs: `[..., in]`.
        kernels: Optional `FoldedKernels` (inference): the layer computes with its
            folded kernel there (an `Int8Kernel`'s product rounds the rows to int8)
            instead of computing `g * v / ||v||` again.

    Example:

    >>> layer = WeightNormDense(8, stddev=0.1)
    >>> layer(tf.ones([2, 5, 4])).shape
    TensorShape([2, 5, 8])
    """

    def __init__(
        self, units: int, stddev: float | None = None, use_bias: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if units <= 0:
            raise ValueError(f"WeightNormDense needs a positive number of units, got {units}.")
        self.units = int(units)
        self.stddev = stddev
        self.use_bias = use_bias

    def build(self, input_shape: Sequence[Any]) -> None:
        input_dim = int(input_shape[-1])
        stddev = self.stddev if self.stddev is not None else (1.0 / input_dim) ** 0.5
        self.kernel_v = self.add_weight(
            name="kernel_v",
            shape=(input_dim, self.units),
            initializer=keras.initializers.RandomNormal(stddev=stddev),
        )
        # g = ||v|| at construction, so the effective kernel starts out equal to v.
        self.kernel_g = self.add_weight(
            name="kernel_g",
            shape=(self.units,),
            initializer=lambda shape, dtype=None: tf.norm(self.kernel_v.value, axis=0),
        )
        self.bias = (
            self.add_weight(name="bias", shape=(self.units,), initializer="zeros")
            if self.use_bias
            else None
        )

    @property
    def kernel(self) -> tf.Tensor:
        """The effective kernel `g * v / ||v||`, shape `[in, units]`, in the variable dtype."""
        v = tf.convert_to_tensor(self.kernel_v.value)
        return v * (tf.convert_to_tensor(self.kernel_g.value) / tf.norm(v, axis=0))

    def call(self, inputs: tf.Tensor, kernels: FoldedKernels | None = None) -> tf.Tensor:
        folded = kernels.kernel(self) if kernels is not None else None
        if isinstance(folded, Int8Kernel):
            outputs = folded.product(inputs)
        elif inputs.shape.rank == 2:
            # A plain product, so graph optimisation fuses the bias into it (a search
            # step projects every hypothesis onto the vocabulary this way).
            outputs = tf.matmul(inputs, self.compute_kernel(kernels))
        else:
            outputs = tf.tensordot(inputs, self.compute_kernel(kernels), axes=1)
        if self.bias is not None:
            outputs = outputs + tf.cast(self.bias, self.compute_dtype)
        return outputs

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"units": self.units, "stddev": self.stddev, "use_bias": self.use_bias})
        return config
