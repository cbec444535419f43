"""Tiny random models for the search tests."""

from convs2s_tf.models import ConvS2S
from convs2s_tf.models.families import build_model

from .models import randomize_weights


def tiny_model(target_vocab_size=5, seed=3, scale=1.0, **overrides):
    """A built ConvS2S of a few 8-wide blocks with random weights (biases and gains too).

    The decoder has kernel widths 3, 2 and 1, attention in its first and last blocks,
    and 38 usable positions (40 with `<pad>`'s offset); the source vocabulary has 11 ids.
    """
    config = dict(
        source_vocab_size=11,
        target_vocab_size=target_vocab_size,
        embed_dim=8,
        encoder_layers="[(8, 3)] * 2",
        decoder_layers="[(8, 3)] + [(12, 2)] + [(8, 1)]",
        decoder_out_embed_dim=8,
        decoder_attention="[True, False, True]",
        max_source_positions=40,
        max_target_positions=40,
    )
    config.update(overrides)
    model = ConvS2S(**config)
    model(model.dummy_inputs())
    randomize_weights(model, seed=seed, scale=scale)
    return model


def tiny_posenet(target_vocab_size=9, seed=3, scale=1.0):
    """A built PoseNet of two 8-wide layers (two heads) with random weights: a family
    whose decoder state grows with the positions decoded."""
    config = dict(
        family="posenet",
        source_vocab_size=11,
        target_vocab_size=target_vocab_size,
        hidden_dim=8,
        encoder_layers=2,
        decoder_layers=2,
        num_heads=2,
        ffn_dim=16,
    )
    model = build_model(config)
    model(model.dummy_inputs())
    randomize_weights(model, seed=seed, scale=scale)
    return model
