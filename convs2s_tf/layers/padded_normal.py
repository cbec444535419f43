"""Normal initializer for embedding tables whose padding row must be zero."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="convs2s_tf")
class PaddedNormal(keras.initializers.Initializer):
    """Draws a `[rows, width]` table from `N(0, stddev)` and zeroes row `pad_id`.

    ConvS2S initialises token and position tables from `N(0, 0.1)` with the padding row
    set to zero, as the authors' implementation does.

    Args:
        stddev: Standard deviation of the normal distribution.
        pad_id: The row set to zero.
        seed: Optional seed.

    Example:

    >>> table = PaddedNormal(stddev=0.1, pad_id=1)((4, 3))
    >>> float(tf.reduce_sum(tf.abs(table[1])))
    0.0
    """

    def __init__(self, stddev: float = 0.1, pad_id: int = 1, seed: int | None = None) -> None:
        self.stddev = stddev
        self.pad_id = pad_id
        self.seed = seed
        self._normal = keras.initializers.RandomNormal(stddev=stddev, seed=seed)

    def __call__(self, shape: Sequence[int], dtype: tf.DType | str | None = None) -> tf.Tensor:
        table = tf.convert_to_tensor(self._normal(shape, dtype=dtype))
        keep = tf.cast(tf.not_equal(tf.range(shape[0]), self.pad_id), table.dtype)
        return table * keep[:, None]

    def get_config(self) -> dict[str, Any]:
        return {"stddev": self.stddev, "pad_id": self.pad_id, "seed": self.seed}
