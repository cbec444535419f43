"""Construction shared by the encoder and the decoder: embeddings and gated conv blocks."""

import math

import keras

from convs2s_tf.layers import (
    LearnedPositionalEmbedding,
    PaddedNormal,
    WeightNormConv1D,
    WeightNormDense,
)


def embedding_layers(vocab_size, embed_dim, max_positions, use_positions, pad_id):
    """The token table and (if `use_positions`) the learned position table, both
    `N(0, 0.1)` with a zero pad row."""
    token_embedding = keras.layers.Embedding(
        vocab_size,
        embed_dim,
        embeddings_initializer=PaddedNormal(stddev=0.1, pad_id=pad_id),
        name="token_embedding",
    )
    position_embedding = (
        LearnedPositionalEmbedding(
            max_positions, embed_dim, pad_id=pad_id, name="position_embedding"
        )
        if use_positions
        else None
    )
    return token_embedding, position_embedding


def embed(token_embedding, position_embedding, dropout_layer, tokens, training, step=None):
    """`e`: token plus position embedding (of incremental `step` if given), with dropout."""
    embedded = token_embedding(tokens)
    if position_embedding is not None:
        if step is None:
            embedded = embedded + position_embedding(tokens)
        else:
            embedded = embedded + position_embedding.step_embedding(step)
    return dropout_layer(embedded, training=training)


def block_layers(layer_spec, dropout, padding):
    """Residual projections and GLU convolutions of the blocks of `layer_spec`.

    Returns:
        `(widths, projections, convolutions)`: `widths[i]` is the input width of block
        `i` (`widths[0]` the input projection's output) and `widths[-1]` the output width;
        `projections[i]` is None where the residual needs no projection (or is absent).
    """
    keep = 1.0 - dropout
    widths = [layer_spec[0].channels]
    projections, convolutions = [], []
    for index, (channels, width, residual) in enumerate(layer_spec):
        in_channels = widths[-1]
        residual_width = widths[-residual] if residual else None
        projections.append(
            WeightNormDense(
                channels, stddev=math.sqrt(1.0 / residual_width), name=f"projection_{index}"
            )
            if residual and residual_width != channels
            else None
        )
        convolutions.append(
            WeightNormConv1D(
                2 * channels,
                width,
                padding=padding,
                stddev=math.sqrt(4.0 * keep / (width * in_channels)),
                name=f"convolution_{index}",
            )
        )
        widths.append(channels)
    return widths, projections, convolutions


def build_blocks(layer_spec, widths, projections, convolutions):
    """Builds the layers from `block_layers` for the widths it returned."""
    for index, (layer, projection, convolution) in enumerate(
        zip(layer_spec, projections, convolutions)
    ):
        if projection is not None:
            projection.build((None, None, widths[index + 1 - layer.residual]))
        convolution.build((None, None, widths[index]))
