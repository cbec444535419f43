"""What the encoder hands to the decoder."""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf


class EncoderOutput(NamedTuple):
    """Encoder output consumed by every decoder attention module.

    Fields:
        keys: `z`, `[batch, source, embed_dim]`, zero at padding.
        values: `(z + e) * sqrt(0.5)`, `[batch, source, embed_dim]`.
        source_mask: `[batch, source]` bool, True at real (non-pad) tokens.
    """

    keys: tf.Tensor
    values: tf.Tensor
    source_mask: tf.Tensor
