"""A decoder state's position axis that keeps only its last positions."""

from __future__ import annotations

import dataclasses


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
