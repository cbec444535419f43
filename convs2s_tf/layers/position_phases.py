"""The widths in which buffers that keep one entry a decoded position are read or grown.

A step that attends to the positions decoded so far needs fixed shapes when XLA compiles
it, so it reads a prefix of its buffer of one of a few fixed widths: `FIRST_PHASE_WIDTH`,
doubling, then the whole buffer. A step never reads more than about twice the positions
it has. The search grows its states through the same widths
(`convs2s_tf.decoding.growing_state`).
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["FIRST_PHASE_WIDTH", "phase_index", "phase_widths"]

# The first phase's width: a multiple of the compiled histories' width
# (`XLA_SOURCE_MULTIPLE`), and enough for most sentences' first words.
FIRST_PHASE_WIDTH = 16


def phase_widths(history_width: int) -> tuple[int, ...]:
    """The fixed widths up to `history_width`: `FIRST_PHASE_WIDTH` doubling while below
    it, then `history_width` itself.

    >>> phase_widths(208)
    (16, 32, 64, 128, 208)
    >>> phase_widths(16)
    (16,)
    """
    widths = []
    width = FIRST_PHASE_WIDTH
    while width < history_width:
        widths.append(width)
        width *= 2
    return tuple(widths) + (int(history_width),)


def phase_index(step: tf.Tensor, widths: tuple[int, ...]) -> tf.Tensor:
    """The index in `widths` (ascending) of the first width above position `step`
    (scalar int32), the last if none is."""
    index = tf.searchsorted(tf.constant(widths, tf.int32), tf.reshape(step + 1, [1]))[0]
    return tf.minimum(index, len(widths) - 1)
