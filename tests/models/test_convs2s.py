"""Tests of the ConvS2S encoder, decoder and model against the design document."""

import math

import numpy as np
import pytest
import tensorflow as tf
from conftest import randomize_weights

from convs2s_tf.layers import LearnedPositionalEmbedding
from convs2s_tf.models import (
    ConvDecoder,
    ConvEncoder,
    ConvS2S,
    LayerSpecError,
    format_summary,
    get_preset,
    list_presets,
    parameter_counts,
    parse_layer_spec,
)
from convs2s_tf.vocabulary import EOS_ID, PAD_ID

SOURCE_VOCAB, TARGET_VOCAB = 23, 29


def tiny_model(**overrides):
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
    return rng.integers(4, vocab, size=shape).astype("int32")


def test_decoder_is_causal(rng):
    model = tiny_model()
    randomize_weights(model, seed=1)
    source = random_tokens(rng, [2, 7], SOURCE_VOCAB)
    target = random_tokens(rng, [2, 9], TARGET_VOCAB)
    target[:, 0] = EOS_ID
    logits = model({"source": source, "target_input": target}).numpy()
    for i in range(8):
        changed = target.copy()
        changed[:, i + 1 :] = random_tokens(rng, [2, 8 - i], TARGET_VOCAB)
        changed_logits = model({"source": source, "target_input": changed}).numpy()
        np.testing.assert_allclose(changed_logits[:, : i + 1], logits[:, : i + 1], atol=1e-6)
        if i < 7:
            # The change is visible later on, so the check above is not vacuous.
            assert not np.allclose(changed_logits[:, i + 1 :], logits[:, i + 1 :], atol=1e-4)


def _pad(sequence, length, side):
    padding = [PAD_ID] * (length - len(sequence))
    return padding + list(sequence) if side == "left" else list(sequence) + padding


def test_padding_invariance(rng):
    model = tiny_model()
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


def test_attention_weights_average_and_padding(rng):
    model = tiny_model()
    randomize_weights(model, seed=3)
    source = np.array([[1, 1, 5, 6, 2], [7, 8, 9, 10, 2]], "int32")
    target = np.array([[2, 5, 6], [2, 7, 8]], "int32")
    logits, attention = model({"source": source, "target_input": target}, return_attention=True)
    attention = attention.numpy()
    assert attention.shape == (2, 3, 5)
    np.testing.assert_allclose(attention.sum(-1), 1.0, rtol=1e-5)
    assert np.all(attention[0, :, :2] == 0.0)
    # The average is over the attention blocks (two of four here).
    encoder_output = model.encode(tf.constant(source))
    _, single = model.decoder(tf.constant(target), encoder_output, return_attention=True)
    np.testing.assert_allclose(single.numpy(), attention)


def test_attention_average_equals_mean_of_blocks(rng):
    model = tiny_model()
    randomize_weights(model, seed=4)
    source = tf.constant(random_tokens(rng, [2, 6], SOURCE_VOCAB))
    target = tf.constant(random_tokens(rng, [2, 4], TARGET_VOCAB))
    encoder_output = model.encode(source)
    _, per_block = model.decoder(target, encoder_output, return_attention="per_block")
    assert len(per_block) == 2
    _, average = model.decoder(target, encoder_output, return_attention=True)
    np.testing.assert_allclose(average.numpy(), np.mean(per_block, axis=0), atol=1e-7)
    assert not np.allclose(per_block[0].numpy(), per_block[1].numpy())


def test_encoder_gradient_scaled_by_attention_layers(rng):
    model = tiny_model(decoder_attention="[True, True, True, False]")
    assert model.encoder.num_attention_layers == 3
    source = tf.constant(np.array([[5, 6, 7, 2], [1, 1, 8, 2]], "int32"))
    upstream = tf.constant(rng.normal(size=[2, 4, 8]).astype("float32"))
    projection = model.encoder.output_projection
    with tf.GradientTape() as tape:
        keys = model.encode(source).keys
        loss = tf.reduce_sum(keys * upstream)
    gradient = tape.gradient(loss, projection.bias).numpy()
    mask = (source.numpy() != PAD_ID)[:, :, None]
    # keys = (x W + b) * mask, so without scaling dloss/db = sum of upstream over real tokens.
    np.testing.assert_allclose(
        gradient, (upstream.numpy() * mask).sum((0, 1)) / (2 * 3), rtol=1e-5, atol=1e-6
    )
    # Forward value is unchanged by the scaling.
    x = model.encoder.input_projection(model.encoder.embed(source))
    assert keys.shape == (2, 4, 8) and x.shape[-1] == 12


def test_encoder_values_are_keys_plus_embedding(rng):
    model = tiny_model()
    randomize_weights(model, seed=5)
    source = tf.constant(random_tokens(rng, [2, 5], SOURCE_VOCAB))
    output = model.encode(source)
    embedded = model.encoder.embed(source)
    np.testing.assert_allclose(
        output.values.numpy(),
        (output.keys.numpy() + embedded.numpy()) * math.sqrt(0.5),
        rtol=1e-5,
        atol=1e-6,
    )


def _std(variable):
    return float(np.std(variable.numpy()))


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


def test_activation_variance_bounded_through_20_blocks(rng):
    encoder = ConvEncoder(vocab_size=200, embed_dim=64, layers="[(64, 3)] * 20", dropout=0.0)
    tokens = tf.constant(random_tokens(rng, [16, 40], 200))
    encoder.build()
    embedded = encoder.embed(tokens)
    x = encoder.input_projection(embedded)
    variances = [float(tf.math.reduce_variance(x))]
    for convolution in encoder.convolutions:
        x = (encoder.glu(convolution(x)) + x) * math.sqrt(0.5)
        variances.append(float(tf.math.reduce_variance(x)))
    # The block loop above mirrors ConvEncoder.call; check it really does.
    np.testing.assert_allclose(
        encoder.output_projection(x).numpy(), encoder(tokens).keys.numpy(), atol=1e-5
    )
    ratios = np.array(variances) / variances[0]
    assert 0.25 < ratios.min() and ratios.max() < 4.0, ratios


@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_incremental_decoding_matches_parallel(width, rng):
    model = tiny_model(
        decoder_layers=f"[(12, {width})] + [(16, {width})] + [(16, {width}, 2)] + [(12, 3)]",
        decoder_attention="[False, True, False, True]",
    )
    randomize_weights(model, seed=width)
    source = np.array([[1, 1, 5, 6, 7, 2], [8, 9, 10, 11, 12, 2]], "int32")
    target = random_tokens(rng, [2, 8], TARGET_VOCAB)
    target[:, 0] = EOS_ID
    encoder_output = model.encode(tf.constant(source))
    parallel, parallel_attention = model.decoder(
        tf.constant(target), encoder_output, return_attention=True
    )
    state = model.decoder.initial_state(2)
    for t in range(target.shape[1]):
        logits, attention, state = model.decoder.step(
            tf.constant(target[:, t]), t, state, encoder_output
        )
        assert np.max(np.abs(logits.numpy() - parallel.numpy()[:, t])) < 1e-5
        np.testing.assert_allclose(attention.numpy(), parallel_attention.numpy()[:, t], atol=1e-6)
    assert all(
        window.shape[1] == layer.kernel_width - 1
        for window, layer in zip(state, model.decoder.layer_spec)
    )


def test_incremental_step_in_tf_function(rng):
    model = tiny_model()
    randomize_weights(model, seed=9)
    decoder = model.decoder
    source = tf.constant(random_tokens(rng, [3, 4], SOURCE_VOCAB))
    target = random_tokens(rng, [3, 5], TARGET_VOCAB)
    encoder_output = model.encode(source)
    parallel = decoder(tf.constant(target), encoder_output).numpy()

    @tf.function
    def step(tokens, t, state, encoder_output):
        return decoder.step(tokens, t, state, encoder_output)

    state = decoder.initial_state(3)
    for t in range(5):
        logits, _, state = step(tf.constant(target[:, t]), tf.constant(t), state, encoder_output)
        np.testing.assert_allclose(logits.numpy(), parallel[:, t], atol=1e-5)
    assert step.experimental_get_tracing_count() == 1


def test_shared_output_embedding(rng):
    model = tiny_model(share_decoder_input_output_embed=True, decoder_out_embed_dim=8)
    assert model.decoder.output_projection is None
    randomize_weights(model, seed=6)
    source = tf.constant(random_tokens(rng, [1, 4], SOURCE_VOCAB))
    target = tf.constant(random_tokens(rng, [1, 3], TARGET_VOCAB))
    logits = model({"source": source, "target_input": target}).numpy()
    hidden = {}
    original = model.decoder.hidden_projection.call

    def spy(x):
        hidden["x"] = original(x)
        return hidden["x"]

    model.decoder.hidden_projection.call = spy
    model({"source": source, "target_input": target})
    del model.decoder.hidden_projection.call
    table = model.decoder.token_embedding.embeddings.numpy()
    expected = hidden["x"].numpy() @ table.T + model.decoder.output_bias.numpy()
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)


def test_shared_embedding_size_mismatch_is_rejected():
    with pytest.raises(ValueError, match="out_embed_dim=10 and embed_dim=8"):
        tiny_model(share_decoder_input_output_embed=True, decoder_out_embed_dim=10)


def test_positions_switchable(rng):
    model = tiny_model(source_positions=False, target_positions=False)
    assert model.encoder.position_embedding is None
    assert model.decoder.position_embedding is None
    assert not any("position" in v.path for v in model.weights)
    # Without positions a token's encoding does not depend on where the sentence starts.
    encoded = model.encode(tf.constant([[5, 2, 1, 1]])).keys.numpy()
    shifted = model.encode(tf.constant([[1, 1, 5, 2]])).keys.numpy()
    np.testing.assert_allclose(encoded[0, :2], shifted[0, 2:], atol=1e-6)
    with_positions = tiny_model()
    assert isinstance(with_positions.encoder.position_embedding, LearnedPositionalEmbedding)


def test_config_round_trip():
    model = tiny_model(share_decoder_input_output_embed=True, decoder_out_embed_dim=8)
    config = model.get_config()
    clone = ConvS2S.from_config(config)
    assert clone.get_config() == config
    for layer in (model.encoder, model.decoder):
        assert type(layer).from_config(layer.get_config()).get_config() == layer.get_config()


def test_checkpoint_restore_into_fresh_model(tmp_path, rng):
    model = tiny_model()
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
    "spec, quoted",
    [
        ("[(512,3)]*9 + __import__('os')", "__import__('os')"),
        ("[(512, 3.5)]", "3.5"),
        ("[(512,3)] * x", "x"),
        ("[(512,3)] ** 2", "[(512,3)] ** 2"),
        ("[(512,3)] + (1,2)", "[(512,3)] + (1,2)"),
        ("[(512,)]", "(512,)"),
        ("[(0,3)]", "(0, 3)"),
        ("[(8,3,2)]", "residual distance 2"),
        ("[(512,3)", "never closed"),
        ("[]", "non-empty"),
        ("", "empty"),
    ],
)
def test_malformed_layer_specs_are_rejected(spec, quoted):
    with pytest.raises(LayerSpecError) as error:
        parse_layer_spec(spec)
    assert quoted in str(error.value)
    assert repr(spec) in str(error.value)


def test_layer_spec_parser_never_evaluates(tmp_path):
    marker = tmp_path / "pwned"
    spec = f"[(1,1)] + [open({str(marker)!r}, 'w')]"
    with pytest.raises(LayerSpecError):
        parse_layer_spec(spec)
    assert not marker.exists()


def test_layer_spec_examples():
    spec = parse_layer_spec("[(512,3)]*9 + [(1024,3)]*4 + [(2048,1)]*2")
    assert len(spec) == 15
    assert spec[0] == (512, 3, 1) and spec[9] == (1024, 3, 1) and spec[-1] == (2048, 1, 1)
    assert parse_layer_spec("[(8, 3, 0), (8, 3, 2)]")[1].residual == 2
    assert parse_layer_spec("2 * [(8, 3)]") == parse_layer_spec("[(8, 3)] * 2")


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"decoder_attention": "[True, False]"}, "list of 4 booleans"),
        ({"decoder_attention": "maybe"}, "unsupported syntax"),
        ({"dropout": 1.0}, "dropout"),
        ({"embed_dim": 0}, "embed_dim"),
        ({"source_vocab_size": 2}, "special tokens"),
        ({"encoder_layers": "[(8, 3)] * 2000"}, "repeat count"),
    ],
)
def test_model_configuration_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_model(**overrides)


PAPER_PRESETS = {
    "iwslt_de_en": (256, [(256, 3)] * 4, [(256, 3)] * 3, 256),
    "wmt_en_ro": (512, [(512, 3)] * 20, [(512, 3)] * 20, 512),
    "wmt_en_de": (768, [(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2, None, 512),
    "wmt_en_fr": (
        768,
        [(512, 3)] * 6 + [(768, 3)] * 4 + [(1024, 3)] * 3 + [(2048, 1)] + [(4096, 1)],
        None,
        512,
    ),
}


@pytest.mark.parametrize("name", sorted(PAPER_PRESETS))
def test_paper_presets(name):
    embed_dim, encoder, decoder, out_embed_dim = PAPER_PRESETS[name]
    decoder = decoder or encoder
    preset = get_preset(name)
    assert preset["embed_dim"] == embed_dim
    assert preset["decoder_out_embed_dim"] == out_embed_dim
    assert [tuple(layer[:2]) for layer in parse_layer_spec(preset["encoder_layers"])] == encoder
    assert [tuple(layer[:2]) for layer in parse_layer_spec(preset["decoder_layers"])] == decoder


def test_preset_registry():
    assert {"iwslt_de_en", "wmt_en_ro", "wmt_en_de", "wmt_en_fr", "multi30k_cpu"} <= set(
        list_presets()
    )
    with pytest.raises(ValueError, match="Unknown architecture preset 'nope'"):
        get_preset("nope")
    model = ConvS2S.from_preset("iwslt_de_en", 50, 60, dropout=0.3)
    assert model.get_config()["dropout"] == 0.3


def test_summary_counts_every_parameter():
    model = tiny_model()
    rows = dict(parameter_counts(model))
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    assert sum(rows.values()) == trainable
    assert rows["decoder/token_embedding"] == TARGET_VOCAB * 8
    text = format_summary(model)
    assert "decoder/attention" in text and f"{sum(rows.values()):,}" in text


def test_decoder_requires_attention_spec_length():
    with pytest.raises(ValueError, match="list of 2 booleans"):
        ConvDecoder(vocab_size=10, embed_dim=4, layers="[(4, 3)] * 2", attention=[True])
