"""Tests of the `ConvS2S` model: padding invariance, initialisation, config, checkpoints."""

import math

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test
from helpers.models import (
    SOURCE_VOCAB,
    TARGET_VOCAB,
    random_tokens,
    randomize_weights,
    small_model_config,
    varied_model,
)

from convs2s_tf.layers import LearnedPositionalEmbedding
from convs2s_tf.models import ConvS2S
from convs2s_tf.vocabulary import EOS_ID, PAD_ID


def test_layer_contract():
    # Two (8, 3) blocks a side, both decoder blocks attending: 14 encoder weights
    # (2 embeddings, 3 + 6 + 3 maps) and 29 decoder weights (2 embeddings, 3 + 18 + 6).
    run_layer_test(
        ConvS2S,
        small_model_config(13, width=8),
        {
            "source": tf.constant([[5, 6, 7, 2], [PAD_ID, 8, 9, 2]]),
            "target_input": tf.constant([[EOS_ID, 5, 6], [EOS_ID, 7, 8]]),
        },
        expected_output_shape=(2, 3, 13),
        expected_num_trainable_weights=43,
        expected_num_non_trainable_variables=2,  # the encoder's and decoder's seed states
        mixed_precision_output_dtype="float32",
    )


def _pad(sequence, length, side):
    padding = [PAD_ID] * (length - len(sequence))
    return padding + list(sequence) if side == "left" else list(sequence) + padding


def test_padding_invariance(rng):
    model = varied_model()
    randomize_weights(model, seed=2)
    source = list(random_tokens(rng, [5], SOURCE_VOCAB)) + [EOS_ID]
    target = [EOS_ID] + list(random_tokens(rng, [6], TARGET_VOCAB))
    other_source = list(random_tokens(rng, [9], SOURCE_VOCAB)) + [EOS_ID]
    other_target = [EOS_ID] + list(random_tokens(rng, [9], TARGET_VOCAB))

    alone = model({"source": tf.constant([source]), "target_input": tf.constant([target])})
    alone = alone.numpy()[0]
    encoded_alone = model.encode(tf.constant([source])).keys.numpy()[0]
    for side in ("left", "right"):
        # The sentence shares a batch with a longer one, so it gets padded.
        batch = {
            "source": tf.constant([_pad(source, 10, side), other_source]),
            "target_input": tf.constant([_pad(target, 10, "right"), other_target]),
        }
        logits = model(batch).numpy()[0, : len(target)]
        np.testing.assert_allclose(logits, alone, atol=1e-5)
        keys = model.encode(batch["source"]).keys.numpy()[0]
        real = slice(10 - len(source), 10) if side == "left" else slice(0, len(source))
        np.testing.assert_allclose(keys[real], encoded_alone, atol=1e-5)
        # Keys are zero at padding.
        assert np.all(np.delete(keys, np.arange(10)[real], axis=0) == 0.0)


def test_initial_weight_std_per_layer_type():
    dropout = 0.2
    keep = 1 - dropout
    model = ConvS2S(
        source_vocab_size=400,
        target_vocab_size=600,
        embed_dim=96,
        encoder_layers="[(128, 3)] + [(192, 5)]",
        decoder_layers="[(128, 3)] + [(192, 2)]",
        decoder_out_embed_dim=80,
        dropout=dropout,
        max_source_positions=300,
        max_target_positions=300,
    )
    model(model.dummy_inputs())
    encoder, decoder = model.encoder, model.decoder
    expected = {
        "source tokens": (encoder.token_embedding.embeddings, 0.1),
        "source positions": (encoder.position_embedding.embeddings, 0.1),
        "target tokens": (decoder.token_embedding.embeddings, 0.1),
        "encoder fc1": (encoder.input_projection.kernel_v, math.sqrt(keep / 96)),
        "decoder fc1": (decoder.input_projection.kernel_v, math.sqrt(keep / 96)),
        "encoder conv0": (encoder.convolutions[0].kernel_v, math.sqrt(4 * keep / (3 * 128))),
        "encoder conv1": (encoder.convolutions[1].kernel_v, math.sqrt(4 * keep / (5 * 128))),
        "decoder conv1": (decoder.convolutions[1].kernel_v, math.sqrt(4 * keep / (2 * 128))),
        "encoder residual projection": (encoder.projections[1].kernel_v, math.sqrt(1 / 128)),
        "decoder residual projection": (decoder.projections[1].kernel_v, math.sqrt(1 / 128)),
        "encoder fc2": (encoder.output_projection.kernel_v, math.sqrt(1 / 192)),
        "attention in": (decoder.attentions[1].in_projection.kernel_v, math.sqrt(1 / 192)),
        "attention out": (decoder.attentions[1].out_projection.kernel_v, math.sqrt(1 / 96)),
        "decoder fc2": (decoder.hidden_projection.kernel_v, math.sqrt(1 / 192)),
        "decoder fc3": (decoder.output_projection.kernel_v, math.sqrt(keep / 80)),
    }
    for name, (variable, std) in expected.items():
        values = variable.numpy()
        if "tokens" in name or "positions" in name:
            values = np.delete(values, PAD_ID, axis=0)
            assert np.all(variable.numpy()[PAD_ID] == 0.0), name
        # n >= 7,000 samples: the sample std is within 3% of the truth with margin.
        assert values.size >= 7000, name
        assert abs(np.std(values) / std - 1) < 0.04, (name, np.std(values), std)
        assert abs(np.mean(values)) < 0.1 * std, name
    for variable in model.trainable_weights:
        if variable.path.endswith("bias"):
            assert np.all(variable.numpy() == 0.0), variable.path


def test_positions_switchable(rng):
    model = varied_model(source_positions=False, target_positions=False)
    assert model.encoder.position_embedding is None
    assert model.decoder.position_embedding is None
    assert not any("position" in v.path for v in model.weights)
    # Without positions a token's encoding does not depend on where the sentence starts.
    encoded = model.encode(tf.constant([[5, 2, 1, 1]])).keys.numpy()
    shifted = model.encode(tf.constant([[1, 1, 5, 2]])).keys.numpy()
    np.testing.assert_allclose(encoded[0, :2], shifted[0, 2:], atol=1e-6)
    with_positions = varied_model()
    assert isinstance(with_positions.encoder.position_embedding, LearnedPositionalEmbedding)


def test_config_round_trip():
    model = varied_model(share_decoder_input_output_embed=True, decoder_out_embed_dim=8)
    config = model.get_config()
    clone = ConvS2S.from_config(config)
    assert clone.get_config() == config
    for layer in (model.encoder, model.decoder):
        assert type(layer).from_config(layer.get_config()).get_config() == layer.get_config()


def test_checkpoint_restore_into_fresh_model(tmp_path, rng):
    model = varied_model()
    randomize_weights(model, seed=7)
    inputs = {
        "source": random_tokens(rng, [2, 6], SOURCE_VOCAB),
        "target_input": random_tokens(rng, [2, 5], TARGET_VOCAB),
    }
    expected = model(inputs).numpy()
    path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    # Every variable is in the checkpoint: layers held per block are tracked.
    stored = {name for name, _ in tf.train.list_variables(path)}
    stored_model_variables = [n for n in stored if n.startswith("model/")]
    assert len(stored_model_variables) == len(model.weights)
    assert any("convolution_3" in name for name in stored)
    assert any("attention_2" in name for name in stored)

    fresh = ConvS2S.from_config(model.get_config())
    fresh(fresh.dummy_inputs())
    assert not np.allclose(fresh(inputs).numpy(), expected)
    status = tf.train.Checkpoint(model=fresh).restore(path)
    status.assert_existing_objects_matched()
    status.assert_consumed()
    np.testing.assert_array_equal(fresh(inputs).numpy(), expected)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"decoder_attention": "[True, False]"}, "list of 4 booleans"),
        ({"decoder_attention": "maybe"}, "unsupported syntax"),
        ({"dropout": 1.0}, "dropout"),
        ({"embed_dim": 0}, "embed_dim"),
        ({"source_vocab_size": 2}, "special tokens"),
        ({"encoder_layers": "[(8, 3)] * 2000"}, "a repeat must give 0 to MAX_LAYERS=1000 layers"),
    ],
)
def test_model_configuration_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        varied_model(**overrides)
