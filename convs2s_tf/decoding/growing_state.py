"""Decoder states that grow with the steps taken, and the widths a search grows them to.

A decoder that keeps every position (self-attention's keys and values) declares, per
state leaf, the axis holding one entry a position (`IncrementalDecoder.position_axes`);
a decoder whose state is a fixed window (ConvS2S) declares none. The search gives
those leaves room before each step (`grow_state`), so a step's cost follows the
positions decoded so far, never the longest output the search allows:

- in graph mode the buffers grow by one column a step (`room` is `step + 1`);
- a compiled step needs fixed shapes, so there the buffers grow in phases of fixed
  widths (`phase_widths`: 16, 32, 64, ... positions, then the whole history), and the
  step compiles once per phase it reaches;
- a compiled search loop (a bucket of small batches) holds one width, its bucket's
  source width (one loop a phase works in process, but an XLA program of several loops
  does not load from a SavedModel); a search that needs more steps goes on in graph
  mode, a column a step (`BucketedSearch`).

A leaf that keeps only its last positions (a causal convolution's window) names its
axis with the positions it keeps (`LimitedAxis`): it grows as the others do up to that
length and then stays, the step writing each new position over the oldest.

Widths at least double from phase to phase, so a compiled step never attends to more
than about twice the positions it has.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from convs2s_tf.decoding.decoder_protocol import IncrementalDecoder
from convs2s_tf.models.limited_axis import LimitedAxis, at_most

__all__ = [
    "FIRST_PHASE_WIDTH",
    "LimitedAxis",
    "grow_state",
    "grows",
    "outgrows",
    "phase_width",
    "phase_widths",
    "state_invariants",
]

# The first phase's width: a multiple of the compiled histories' width
# (`XLA_SOURCE_MULTIPLE`), and enough for most sentences' first words.
FIRST_PHASE_WIDTH = 16


def _axis(axis: int | LimitedAxis | None) -> int | None:
    return axis.axis if isinstance(axis, LimitedAxis) else axis


def grows(decoder: IncrementalDecoder, state: Any) -> bool:
    """Whether any leaf of the decoder's `state` has a position axis."""
    return any(axis is not None for axis in tf.nest.flatten(decoder.position_axes(state)))


def outgrows(decoder: IncrementalDecoder, state: Any, width: int) -> bool:
    """Whether a leaf of the decoder's `state` may need more than `width` positions
    (a position axis without a limit, or with one above `width`)."""
    return any(
        axis is not None and (not isinstance(axis, LimitedAxis) or axis.length > width)
        for axis in tf.nest.flatten(decoder.position_axes(state))
    )


def grow_state(decoder: IncrementalDecoder, state: Any, width: int | tf.Tensor) -> Any:
    """`state` with room for `width` positions: each leaf with a position axis
    (`decoder.position_axes`) zero-padded on it to `width` (a `LimitedAxis` to at most
    its length), the others as they are.

    Args:
        decoder: The decoder whose state it is.
        state: Its incremental state, each growing leaf at most `width` positions wide.
        width: Scalar int, the positions to make room for.
    """

    def grow(leaf: tf.Tensor, axis: int | LimitedAxis | None) -> tf.Tensor:
        if axis is None:
            return leaf
        if isinstance(axis, LimitedAxis):
            index, room = axis.axis, at_most(width, axis.length)
        else:
            index, room = axis, width
        paddings = [[0, 0]] * leaf.shape.rank
        paddings[index] = [0, room - tf.shape(leaf)[index]]
        # (At its length a limited leaf is padded by nothing: TensorFlow forwards it.)
        return tf.pad(leaf, paddings)

    return tf.nest.map_structure(grow, state, decoder.position_axes(state))


def state_invariants(decoder: IncrementalDecoder, state: Any, growing: bool = True) -> Any:
    """The `tf.while_loop` shape invariants of a decoder state: any number of rows
    (hypotheses leave with their sentences), and, if the loop grows it, any width on a
    position axis."""

    def invariant(leaf: tf.Tensor, axis: int | LimitedAxis | None) -> tf.TensorShape:
        dims = [None] + leaf.shape.as_list()[1:]
        if axis is not None and growing:
            dims[_axis(axis)] = None
        return tf.TensorShape(dims)

    return tf.nest.map_structure(invariant, state, decoder.position_axes(state))


def phase_widths(history_width: int) -> tuple[int, ...]:
    """The fixed widths a compiled search grows its state through: `FIRST_PHASE_WIDTH`
    doubling while below `history_width`, then `history_width` itself.

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


def phase_width(step: tf.Tensor, history_width: int | tf.Tensor, longest: int) -> tf.Tensor:
    """The width of the phase that holds position `step`: the first of
    `phase_widths(longest)` above `step`, at most `history_width`.

    Args:
        step: Scalar int32, the position a step writes.
        history_width: Scalar int, the search's token history width (more than its
            last step).
        longest: The most positions any search of the decoder takes (its position
            table), which bounds the doublings.
    """
    widths = tf.constant(phase_widths(longest), tf.int32)
    index = tf.searchsorted(widths, tf.reshape(step + 1, [1]))[0]
    return tf.minimum(tf.gather(widths, index), history_width)
