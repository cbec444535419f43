"""Gated linear unit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="convs2s_tf")
class GLU(keras.layers.Layer):
    """Gated linear unit (Dauphin et al., 2017): `GLU([A B]) = A * sigmoid(B)`.

    `A` is the first half of the channels along `axis` and `B` the second, as in the
    authors' implementation (`torch.nn.functional.glu`), so a convolution with
    `2 * c` output channels yields `c` channels.

    Args:
        axis: The axis split in two halves.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    >>> GLU()(tf.ones([2, 3, 8])).shape
    TensorShape([2, 3, 4])
    """

    def __init__(self, axis: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.axis = axis

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        if inputs.shape[self.axis] is not None and inputs.shape[self.axis] % 2:
            raise ValueError(
                f"GLU needs an even number of channels on axis {self.axis}, got shape "
                f"{inputs.shape}."
            )
        linear, gate = tf.split(inputs, 2, axis=self.axis)
        return linear * tf.sigmoid(gate)

    def compute_output_shape(self, input_shape: Sequence[int | None]) -> tuple[int | None, ...]:
        shape: list[Any] = list(input_shape)
        if shape[self.axis] is not None:
            shape[self.axis] //= 2
        return tuple(shape)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"axis": self.axis})
        return config
