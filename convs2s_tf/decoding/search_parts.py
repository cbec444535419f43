"""One batch searched as several searches of its rows, side by side, one per core.

A graph-mode search step is a chain of small operations. Spread over all cores (the
intra-op threads), a step mostly waits for them to synchronise; given one core each
(one intra-op thread: `search_one_batch_per_core`, or TF Serving's
`--tensorflow_intra_op_parallelism=1`), several independent searches keep every core
busy, and the executor runs the parts' loops at once since none needs another's output.
So a lone request of many sentences uses the whole machine (docs/performance.md,
"Several cores").

A sentence's search does not depend on the rows searched with it (`beam_search`), so
the parts give the same translations as the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from convs2s_tf.decoding.beam_state import SearchOutput
from convs2s_tf.vocabulary import PAD_ID

__all__ = ["search_in_parts"]


def search_in_parts(
    search: Callable[[tf.Tensor], SearchOutput], source: tf.Tensor, parts: int
) -> SearchOutput:
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
    # Part k ends at ceil(batch * k / parts): the first part has the most rows, so it
    # always runs for a non-empty batch and gives the structure the empty parts copy.
    bounds = [(batch * part + parts - 1) // parts for part in range(parts + 1)]
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


def _empty_like(output: SearchOutput) -> SearchOutput:
    """An output of no rows shaped as `output` in its other axes."""
    attention = None if output.attention is None else output.attention[:0]
    return output._replace(
        tokens=output.tokens[:0],
        scores=output.scores[:0],
        lengths=output.lengths[:0],
        attention=attention,
    )


def _joined(outputs: list[SearchOutput]) -> SearchOutput:
    """The outputs' rows in order, their tokens and attention padded to the most columns."""
    width = tf.reduce_max(tf.stack([tf.shape(output.tokens)[2] for output in outputs]))
    attention = None
    if outputs[0].attention is not None:
        attention = tf.concat([_pad_columns(o.attention, width, 0.0) for o in outputs], 0)
    return outputs[0]._replace(
        tokens=tf.concat([_pad_columns(o.tokens, width, PAD_ID) for o in outputs], 0),
        scores=tf.concat([o.scores for o in outputs], 0),
        lengths=tf.concat([o.lengths for o in outputs], 0),
        attention=attention,
    )


def _pad_columns(tensor: tf.Tensor, width: tf.Tensor, value: float) -> tf.Tensor:
    """`tensor` (`[rows, nbest, columns, ...]`) padded with `value` to `width` columns."""
    paddings = [[0, 0]] * tensor.shape.rank
    paddings[2] = [0, width - tf.shape(tensor)[2]]
    return tf.pad(tensor, paddings, constant_values=tf.cast(value, tensor.dtype))
