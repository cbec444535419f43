"""Tests of `ConvDecoder`: causality, attention, incremental decoding, shared embeddings."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test
from helpers.models import (
    SOURCE_VOCAB,
    TARGET_VOCAB,
    random_tokens,
    randomize_weights,
    varied_model,
)

from convs2s_tf.models import ConvDecoder, EncoderOutput
from convs2s_tf.vocabulary import EOS_ID

TOKENS = tf.constant([[EOS_ID, 5, 6, 7], [EOS_ID, 8, 9, 2]])
ENCODER_OUTPUT = EncoderOutput(
    keys=tf.random.stateless_normal([2, 5, 6], seed=[1, 1]),
    values=tf.random.stateless_normal([2, 5, 6], seed=[2, 2]),
    source_mask=tf.sequence_mask([5, 3], 5),
)


def _step(decoder, t, state):
    logits, _, state = decoder.step(TOKENS[:, t], t, state, ENCODER_OUTPUT)
    return logits, state


@pytest.mark.parametrize(
    "overrides, trainable_weights",
    [({}, 35), ({"share_embeddings": True, "out_embed_dim": 6}, 33)],
    ids=["output_projection", "shared_embeddings"],
)
def test_layer_contract_and_step(overrides, trainable_weights):
    # Block 2 (distance 2) has a residual projection (8 -> 10) and attention; block 1
    # has neither. 35 = 2 embeddings + 3 input projection + 9 + 3 + 12 (blocks) + 3 hidden
    # projection + 3 output projection (or 1 output bias with shared embeddings).
    run_layer_test(
        ConvDecoder,
        {
            "vocab_size": 13,
            "embed_dim": 6,
            "layers": "[(8, 3), (8, 2), (10, 1, 2)]",
            "out_embed_dim": 5,
            "attention": [True, False, True],
            **overrides,
        },
        (TOKENS, ENCODER_OUTPUT),
        expected_output_shape=(2, 4, 13),
        expected_output_dtype="float32",
        expected_num_trainable_weights=trainable_weights,
        expected_num_non_trainable_variables=1,  # the shared dropout's seed state
        initial_state_fn=lambda decoder: decoder.initial_state(2),
        step_fn=_step,
        mixed_precision_output_dtype="float32",  # logits are float32 in any policy
    )


def test_decoder_is_causal(rng):
    model = varied_model()
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


def test_attention_weights_average_and_padding(rng):
    model = varied_model()
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
    model = varied_model()
    randomize_weights(model, seed=4)
    source = tf.constant(random_tokens(rng, [2, 6], SOURCE_VOCAB))
    target = tf.constant(random_tokens(rng, [2, 4], TARGET_VOCAB))
    encoder_output = model.encode(source)
    _, per_block = model.decoder(target, encoder_output, return_attention="per_block")
    assert len(per_block) == 2
    _, average = model.decoder(target, encoder_output, return_attention=True)
    np.testing.assert_allclose(average.numpy(), np.mean(per_block, axis=0), atol=1e-7)
    assert not np.allclose(per_block[0].numpy(), per_block[1].numpy())


@pytest.mark.parametrize("width", [1, 2, 3, 5])
def test_incremental_decoding_matches_parallel(width, rng):
    model = varied_model(
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
    model = varied_model()
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
    model = varied_model(share_decoder_input_output_embed=True, decoder_out_embed_dim=8)
    assert model.decoder.output_projection is None
    randomize_weights(model, seed=6)
    source = tf.constant(random_tokens(rng, [1, 4], SOURCE_VOCAB))
    target = tf.constant(random_tokens(rng, [1, 3], TARGET_VOCAB))
    logits = model({"source": source, "target_input": target}).numpy()
    hidden = {}
    original = model.decoder.hidden_projection.call

    def spy(x, **kwargs):
        hidden["x"] = original(x, **kwargs)
        return hidden["x"]

    model.decoder.hidden_projection.call = spy
    model({"source": source, "target_input": target})
    del model.decoder.hidden_projection.call
    table = model.decoder.token_embedding.embeddings.numpy()
    expected = hidden["x"].numpy() @ table.T + model.decoder.output_bias.numpy()
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)


def test_shared_embedding_size_mismatch_is_rejected():
    with pytest.raises(ValueError, match="out_embed_dim=10 and embed_dim=8"):
        varied_model(share_decoder_input_output_embed=True, decoder_out_embed_dim=10)


def test_decoder_requires_attention_spec_length():
    with pytest.raises(ValueError, match="list of 2 booleans"):
        ConvDecoder(vocab_size=10, embed_dim=4, layers="[(4, 3)] * 2", attention=[True])
