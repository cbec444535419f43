"""One batch searched as several searches of its rows, side by side, one per core.

A graph-mode search step is a chain of small operations. Spread over all cores (the
intra-op threads), a step mostly waits for them to synchronise; given one core each
(one intra-op thread: `search_one_batch_per_core`, or TF Serving's
`--tensorflow_intra_op_parallelism=1`), several independent searches keep every core
busy, and the executor runs the parts' loops at once since none needs another's output.
So a lone request of many sentences uses the whole machine (docs/performance.md, "One
request, one search per core").

A sentence's search does not depend on the rows searched with it (`beam_search`), so
the parts give the same translations as the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import tensorflow as tf

from convs2s_tf.vocabulary import PAD_ID

__all__ = ["search_in_parts"]

# A `SearchOutput` (a NamedTuple: tokens, scores, lengths, attention or None).
_Output = TypeVar("_Output", bound=tuple)


def search_in_parts(
    search: Callable[[tf.Tensor], _Output], source: tf.Tensor, parts: int
) -> _Output:
    """`search(source)`, computed as `parts` searches of consecutive rows of `source`.

    The rows are shared out as evenly as they go (the first parts take one more); a part
    left without rows (a batch of fewer than `parts` sentences) is not searched. The
    outputs are joined in the rows' order, their tokens padded with `<pad>` (and their
    attention with zeros) to the longest part's columns.

    Args:
        search: Maps `[rows, source]` ids to a `SearchOutput` of `[rows, nbest, ...]`
            tensors; called once per part while tracing.
        source: `[batch, source]` int32 ids.
        parts: Searches to run (>= 1; 1 calls `search(source)`).

    Returns:
        The joined `SearchOutput`, as `search(source)` would give it up to its padding.

    Example:

    >>> from convs2s_tf.decoding import SearchConfig, beam_search
    >>> from convs2s_tf.models import ConvS2S
    >>> model = ConvS2S(20, 20, embed_dim=8, encoder_layers="[(8, 3)]",
    ...                 decoder_layers="[(8, 3)]", decoder_out_embed_dim=8)
    >>> model.build()
    >>> config = SearchConfig(beam_size=2, max_len_b=4, parts=1)
    >>> source = tf.constant([[5, 6, 2], [7, 2, 1], [8, 9, 2]])
    >>> output = search_in_parts(lambda rows: beam_search(model, rows, config), source, 2)
    >>> output.tokens.shape[:2]
    TensorShape([3, 1])
    """
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}.")
    if parts == 1:
        return search(source)
    batch = tf.shape(source)[0]
    bounds = [(batch * part) // parts for part in range(parts + 1)]
    # The first part has the most rows (ceil), so it always runs for a non-empty batch
    # and gives the structure the empty parts copy.
    bounds = [batch - bound for bound in reversed(bounds)]
    first = search(source[bounds[0] : bounds[1]])
    outputs = [first]
    for start, end in zip(bounds[1:-1], bounds[2:]):
        rows = source[start:end]
        outputs.append(
            tf.cond(
                end > start,
                lambda rows=rows: search(rows),
                lambda: _empty_like(first),
            )
        )
    return _joined(outputs)


def _empty_like(output: _Output) -> _Output:
    """An output of no rows shaped as `output` in its other axes."""
    return type(output)(*(None if t is None else t[:0] for t in output))


def _joined(outputs: list[_Output]) -> _Output:
    """The outputs' rows in order, each padded to the most columns (axis 2)."""
    fields = []
    for tensors in zip(*outputs):
        if tensors[0] is None:
            fields.append(None)
            continue
        if tensors[0].shape.rank < 3:  # scores, lengths: [rows, nbest]
            fields.append(tf.concat(tensors, axis=0))
            continue
        width = tf.reduce_max(tf.stack([tf.shape(t)[2] for t in tensors]))
        pad_value = PAD_ID if tensors[0].dtype.is_integer else 0
        padded = [_pad_axis(t, 2, width, pad_value) for t in tensors]
        fields.append(tf.concat(padded, axis=0))
    return type(outputs[0])(*fields)


def _pad_axis(tensor: tf.Tensor, axis: int, size: tf.Tensor, value: int) -> tf.Tensor:
    paddings = [[0, 0]] * tensor.shape.rank
    paddings[axis] = [0, size - tf.shape(tensor)[axis]]
    return tf.pad(tensor, paddings, constant_values=tf.cast(value, tensor.dtype))
