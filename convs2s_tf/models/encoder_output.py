"""What the encoder hands to the decoder."""

import collections

EncoderOutput = collections.namedtuple("EncoderOutput", ["keys", "values", "source_mask"])
EncoderOutput.__doc__ = """Encoder output consumed by every decoder attention module.

Fields:
    keys: `z`, `[batch, source, embed_dim]`, zero at padding.
    values: `(z + e) * sqrt(0.5)`, `[batch, source, embed_dim]`.
    source_mask: `[batch, source]` bool, True at real (non-pad) tokens.
"""
