"""Tests of `PoseNetEncoder`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.models.posenet.posenet_encoder import PoseNetEncoder, parse_dilations
from convs2s_tf.vocabulary import PAD_ID

SMALL = dict(vocab_size=20, hidden_dim=8, num_layers=2, ffn_dim=16, num_heads=2)


@pytest.mark.parametrize(
    "switches",
    [
        {},
        {"self_attention": True, "timing": "input", "groups": 2, "ffn_layers": 0},
        {"norm_placement": "pre", "self_attention": True},
    ],
    ids=["defaults", "switched", "pre_norm"],
)
def test_layer_contract(switches):
    run_layer_test(
        PoseNetEncoder,
        {**SMALL, **switches},
        tf.constant([[5, 6, 7, 2], [8, 2, PAD_ID, PAD_ID]]),
        expected_output_shape=((2, 4, 8), (2, 4)),
        build_shape=None,
        expected_num_trainable_weights=_weights(switches),
        expected_num_non_trainable_variables=_seed_generators(switches),
        call_kwargs={"training": False},
        mixed_precision_output_dtype=("bfloat16", None),
    )


def _weights(switches):
    per_box = 2 * 4  # two convolutions: two kernels and a norm's gamma and beta each
    per_layer = 2 * per_box
    if switches.get("ffn_layers", 2):
        per_layer += 4 + 2  # two dense maps, their norm
    if switches.get("self_attention"):
        per_layer += 8 + 2
    final_norm = 2 if switches.get("norm_placement") == "pre" else 0
    return 1 + 2 * per_layer + final_norm  # the token embedding


def _seed_generators(switches):
    per_layer = 0
    if switches.get("ffn_layers", 2):
        per_layer += 2  # the net's dropout, its sub-layer's
    if switches.get("self_attention"):
        per_layer += 2
    return 1 + 2 * per_layer  # the embedding dropout


def test_padding_changes_nothing_at_real_positions():
    tf.keras.utils.set_random_seed(1)
    encoder = PoseNetEncoder(**SMALL, self_attention=True)
    short = encoder(tf.constant([[5, 6, 7, 2]])).hidden.numpy()
    padded = encoder(tf.constant([[5, 6, 7, 2, PAD_ID, PAD_ID]]))
    np.testing.assert_allclose(padded.hidden.numpy()[:, :4], short, atol=1e-5)
    assert not padded.hidden.numpy()[:, 4:].any()
    assert padded.source_mask.numpy().tolist() == [[True] * 4 + [False] * 2]


def test_timing_placement_matters():
    tf.keras.utils.set_random_seed(2)
    every = PoseNetEncoder(**SMALL)
    once = PoseNetEncoder.from_config({**every.get_config(), "timing": "input"})
    tokens = tf.constant([[5, 6, 7, 2]])
    every(tokens), once(tokens)
    once.set_weights(every.get_weights())
    assert not np.allclose(every(tokens).hidden.numpy(), once(tokens).hidden.numpy())


def test_dilation_schemes():
    assert parse_dilations("1.2.4.8") == (1, 2, 4, 8)
    for bad in ("1.2.4", "1.2.x.8", "0.1.1.1"):
        with pytest.raises(ValueError, match="dilation scheme"):
            parse_dilations(bad)
    with pytest.raises(ValueError, match="timing must be one of"):
        PoseNetEncoder(20, timing="never")


@pytest.mark.parametrize("norm_placement", ["post", "pre"])
def test_checkpoints_hold_every_sublayer(tmp_path, norm_placement):
    tokens = tf.constant([[5, 6, 7, 2]])
    written = PoseNetEncoder(**SMALL, self_attention=True, norm_placement=norm_placement)
    read = PoseNetEncoder(**SMALL, self_attention=True, norm_placement=norm_placement)
    written(tokens), read(tokens)
    path = tf.train.Checkpoint(encoder=written).write(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(encoder=read).read(path).assert_existing_objects_matched()
    for mine, theirs in zip(written.weights, read.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
