"""A decoder state's position axis that keeps only its last positions."""

from __future__ import annotations

import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class LimitedAxis:
    """A leaf's position axis that keeps only the last `length` positions: the search
    grows it to at most `length` columns, and position `p` lives in column `p % length`.
    (A dataclass: `tf.nest` takes it as one leaf of the axes' nest.)

    Attributes:
        axis: The leaf's position axis.
        length: The positions it keeps.
    """

    axis: int
    length: int


def at_most(width: int | tf.Tensor, limit: int) -> int | tf.Tensor:
    """`min(width, limit)`, a Python int for a Python int `width` (so a static shape
    stays static).

    >>> at_most(40, 32)
    32
    """
    return min(width, limit) if isinstance(width, int) else tf.minimum(width, limit)
