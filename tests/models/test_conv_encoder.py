"""Tests of `ConvEncoder`: keys and values, gradient scaling, activation variance."""

import math

import numpy as np
import tensorflow as tf
from helpers.layer_test import run_layer_test
from helpers.models import SOURCE_VOCAB, random_tokens, randomize_weights, varied_model

from convs2s_tf.models import ConvEncoder
from convs2s_tf.vocabulary import PAD_ID


def test_layer_contract():
    # 20 = 2 embeddings + 3 input projection + 3 + 6 (with the 8 -> 10 residual
    # projection) + 3 (no residual) for the blocks + 3 output projection.
    run_layer_test(
        ConvEncoder,
        {
            "vocab_size": 13,
            "embed_dim": 6,
            "layers": "[(8, 3), (10, 2), (10, 5, 0)]",
            "num_attention_layers": 2,
        },
        tf.constant([[5, 6, 7, 8, 2], [PAD_ID, PAD_ID, 9, 10, 2]]),
        expected_output_shape=((2, 5, 6), (2, 5, 6), (2, 5)),
        expected_num_trainable_weights=20,
        expected_num_non_trainable_variables=1,  # the shared dropout's seed state
        mixed_precision_output_dtype=("bfloat16", "bfloat16", None),
    )


def test_encoder_gradient_scaled_by_attention_layers(rng):
    model = varied_model(decoder_attention="[True, True, True, False]")
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
    model = varied_model()
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


def test_activation_variance_bounded_through_20_blocks(rng):
    encoder = ConvEncoder(vocab_size=200, embed_dim=64, layers="[(64, 3)] * 20", dropout=0.0)
    tokens = tf.constant(random_tokens(rng, [16, 40], 200))
    encoder.build()
    embedded = encoder.embed(tokens)
    x = encoder.input_projection(embedded)
    variances = [float(tf.math.reduce_variance(x))]
    for block in encoder.blocks:
        x = block(x, residual=x)
        variances.append(float(tf.math.reduce_variance(x)))
    # No padding, so the loop above is ConvEncoder.call; check it really is.
    np.testing.assert_allclose(
        encoder.output_projection(x).numpy(), encoder(tokens).keys.numpy(), atol=1e-5
    )
    ratios = np.array(variances) / variances[0]
    assert 0.25 < ratios.min() and ratios.max() < 4.0, ratios
