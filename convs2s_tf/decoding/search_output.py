"""What a beam search returns: each sentence's n-best hypotheses."""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

__all__ = ["SearchOutput"]


class SearchOutput(NamedTuple):
    """The n-best hypotheses of every sentence, best first.

    Fields:
        tokens: `[batch, nbest, time]` int32, each ending in `</s>` then `<pad>`.
        scores: `[batch, nbest]` float32, `sum log p / length ** alpha`.
        lengths: `[batch, nbest]` int32, tokens including `</s>`.
        attention: `[batch, nbest, time, source]` float32 attention averaged over the
            decoder's attention blocks, or None when not requested.
    """

    tokens: tf.Tensor
    scores: tf.Tensor
    lengths: tf.Tensor
    attention: tf.Tensor | None
