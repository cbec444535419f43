"""Small ConvS2S models and configurations shared by the model, decoding, run and
training tests."""

import json
import os

import numpy as np

from convs2s_tf.models import ConvS2S

# Vocabulary sizes of `varied_model`.
SOURCE_VOCAB, TARGET_VOCAB = 23, 29


def randomize_weights(model, seed=0, scale=0.3):
    """Gives every float variable random values (biases and gains included).

    At construction biases are zero and gains equal the norms, which can hide a missing
    mask or a wrong residual; tests of structural rules run on random weights instead.
    """
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if variable.dtype not in ("float32", "float64") or not variable.trainable:
            continue
        values = rng.normal(0.0, scale, size=variable.shape).astype(variable.dtype)
        if variable.path.endswith("kernel_g"):
            values = np.abs(values) + 0.5
        variable.assign(values)


def small_model_config(vocab_size, width=16, blocks=2, max_positions=32, **overrides):
    """`ConvS2S` arguments of a small model: `blocks` blocks of `(width, 3)` on each side,
    every embedding `width` wide, one vocabulary for both sides."""
    layers = f"[({width}, 3)] * {blocks}" if blocks > 1 else f"[({width}, 3)]"
    config = dict(
        source_vocab_size=vocab_size,
        target_vocab_size=vocab_size,
        embed_dim=width,
        encoder_layers=layers,
        decoder_layers=layers,
        decoder_out_embed_dim=width,
        max_source_positions=max_positions,
        max_target_positions=max_positions,
    )
    config.update(overrides)
    return config


def varied_model(**overrides):
    """A built ConvS2S whose blocks vary: widths change (residual projections), residual
    distances 2 and 0, kernel widths 1 to 5, attention in two of four decoder blocks."""
    config = dict(
        source_vocab_size=SOURCE_VOCAB,
        target_vocab_size=TARGET_VOCAB,
        embed_dim=8,
        encoder_layers="[(12, 3)] * 2 + [(16, 2, 2)] + [(16, 5, 0)]",
        decoder_layers="[(12, 3)] + [(16, 2)] + [(16, 1, 2)] + [(12, 5)]",
        decoder_out_embed_dim=10,
        decoder_attention="[True, False, True, False]",
        dropout=0.1,
        max_source_positions=64,
        max_target_positions=64,
    )
    config.update(overrides)
    model = ConvS2S(**config)
    model(model.dummy_inputs())
    return model


def random_tokens(rng, shape, vocab):
    """Random ids of ordinary tokens (none of the four special ones)."""
    return rng.integers(4, vocab, size=shape).astype("int32")


def write_random_run(model_dir, model, prepared):
    """Makes `model_dir` a run directory as pipelines.train writes one: a checkpoint of
    the built `model` and config.json naming it and `prepared`'s data (a `PrepareResult`)
    and SentencePiece model. Returns `model_dir`."""
    import tensorflow as tf

    tf.train.Checkpoint(model=model).save(str(model_dir / "checkpoints" / "ckpt"))
    model_config = model.get_config()
    for key in ("name", "trainable", "dtype"):
        model_config.pop(key, None)
    sentencepiece_model = prepared.data.sentencepiece_model_path
    run_config = {
        "model": model_config,
        "sentencepiece_model": sentencepiece_model,
        "data_dir": os.path.dirname(sentencepiece_model),
    }
    (model_dir / "config.json").write_text(json.dumps(run_config))
    return model_dir
