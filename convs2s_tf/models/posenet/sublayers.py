"""What PoseNet's encoder and decoder layers are made of, made and tracked in one place."""

from __future__ import annotations

from typing import Any

import keras

from convs2s_tf.layers.checkpoint_tracking import track_for_checkpoint
from convs2s_tf.models.posenet.layer_norm import LayerNorm
from convs2s_tf.models.posenet.multi_head_attention import MultiHeadAttention
from convs2s_tf.models.posenet.positionwise_ffn import PositionwiseFFN
from convs2s_tf.models.posenet.residual_norm import PLACEMENTS, ResidualNorm


def token_embedding(vocab_size: int, hidden_dim: int) -> keras.layers.Embedding:
    """The token table, drawn as the Transformer's (std `hidden_dim ** -0.5`, so that the
    `sqrt(hidden_dim)` scale of the embedding gives unit-size vectors)."""
    return keras.layers.Embedding(
        vocab_size,
        hidden_dim,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=hidden_dim**-0.5),
        name="token_embedding",
    )


def attention_sublayer(
    enabled: bool, num_heads: int, attention_dropout: float, dropout: float, placement: str
) -> tuple[MultiHeadAttention | None, ResidualNorm | None]:
    """A multi-head attention and the residual norm around it; `(None, None)` when off."""
    if not enabled:
        return None, None
    return MultiHeadAttention(num_heads, attention_dropout), ResidualNorm(dropout, placement)


def ffn_sublayer(
    ffn_dim: int, ffn_layers: int, dropout: float, placement: str
) -> tuple[PositionwiseFFN | None, ResidualNorm | None]:
    """The feed-forward net of `ffn_layers` maps and the residual norm around it;
    `(None, None)` for none."""
    if not ffn_layers:
        return None, None
    return (
        PositionwiseFFN(ffn_dim, num_layers=ffn_layers, dropout=dropout),
        ResidualNorm(dropout, placement),
    )


def final_norm(placement: str) -> LayerNorm | None:
    """The norm that ends a stack whose residual norms are `"pre"` (its stream is
    unnormalised); None for `"post"`, whose last join normalises already."""
    if placement not in PLACEMENTS:
        raise ValueError(f"norm_placement must be one of {PLACEMENTS}, got {placement!r}.")
    if placement == "post":
        return None
    return LayerNorm(epsilon=1e-6, name="final_norm")


def track_layer(owner: keras.layers.Layer, layer: Any, index: int) -> None:
    """Tracks the sub-layers of dataclass `layer` (number `index`) on `owner` as
    `layer_<index>_<role>`: `tf.train.Checkpoint` does not look into Python lists."""
    track_for_checkpoint(
        owner,
        [
            (f"layer_{index}_{role}", sublayer)
            for role, sublayer in vars(layer).items()
            if sublayer is not None
        ],
    )


def build_layer(layer: Any, hidden_dim: int, two_input_roles: tuple[str, ...] = ()) -> None:
    """Builds the sub-layers of dataclass `layer` for `[batch, time, hidden_dim]` inputs;
    the residual norms (`*_norm`) and the roles in `two_input_roles` take two."""
    shape = (None, None, hidden_dim)
    for role, sublayer in vars(layer).items():
        if sublayer is None:
            continue
        if role.endswith("_norm") or role in two_input_roles:
            sublayer.build(shape, shape)
        else:
            sublayer.build(shape)
