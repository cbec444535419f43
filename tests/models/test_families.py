"""Tests of the model family registry and of the decoder contract on every family."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.decoder_contract import check_decoder_contract

from convs2s_tf.models import ConvS2S
from convs2s_tf.models.families import (
    FAMILY_KEY,
    ModelFamily,
    build_model,
    family_of,
    get_family,
    list_families,
    register_family,
    with_family,
)

VOCAB = 40


def small_config(family):
    """A small model of `family`: its first preset, narrowed where the family allows."""
    arguments = dict(source_vocab_size=VOCAB, target_vocab_size=VOCAB)
    if family == "convs2s":
        arguments.update(
            embed_dim=16,
            encoder_layers="[(16, 3)] * 2",
            decoder_layers="[(16, 3), (16, 2)]",
            decoder_out_embed_dim=8,
            decoder_attention="[True, False]",
        )
    elif family == "posenet":
        arguments.update(hidden_dim=8, encoder_layers=2, decoder_layers=2, num_heads=2, ffn_dim=16)
    return with_family(family, arguments)


def test_configs_without_a_family_are_convs2s():
    config = {"source_vocab_size": VOCAB, "target_vocab_size": VOCAB}
    assert family_of(config).name == "convs2s"
    assert isinstance(build_model(config), ConvS2S)
    named = with_family("convs2s", config)
    assert named[FAMILY_KEY] == "convs2s" and isinstance(build_model(named), ConvS2S)
    assert (
        build_model(named).get_config()["embed_dim"] == ConvS2S(**config).get_config()["embed_dim"]
    )


def test_unknown_and_duplicate_families_are_refused():
    with pytest.raises(ValueError, match="Unknown model family 'nope'; known: convs2s, posenet"):
        get_family("nope")
    with pytest.raises(ValueError, match="Unknown model family"):
        build_model({FAMILY_KEY: "nope", "source_vocab_size": VOCAB})
    convs2s = get_family("convs2s")
    with pytest.raises(ValueError, match="already registered"):
        register_family(ModelFamily("convs2s", ConvS2S, list, dict, str))
    assert "multi30k_cpu" in convs2s.list_presets() and convs2s.fairseq_refusal is None


@pytest.mark.parametrize("family", list_families())
def test_every_family_keeps_the_decoder_contract(family):
    tf.keras.utils.set_random_seed(3)
    model = build_model(small_config(family))
    model(model.dummy_inputs())
    rng = np.random.default_rng(0)
    source = rng.integers(4, VOCAB, size=(2, 5))
    histories = rng.integers(4, VOCAB, size=(4, 6))
    histories[:, 0] = 2  # </s> starts every decoder input
    check_decoder_contract(model, source, histories, beam_size=2, swap_at=3)


@pytest.mark.parametrize("family", list_families())
def test_every_family_keeps_the_decoder_contract_in_bfloat16(family):
    from convs2s_tf.runs import build_model as build_in_dtype

    tf.keras.utils.set_random_seed(5)
    model = build_in_dtype(small_config(family), compute_dtype="bfloat16")
    assert model.decoder.compute_dtype == "bfloat16"
    assert all(weight.dtype == "float32" for weight in model.weights)
    rng = np.random.default_rng(3)
    source = rng.integers(4, VOCAB, size=(2, 5))
    histories = rng.integers(4, VOCAB, size=(4, 6))
    histories[:, 0] = 2
    # bfloat16 keeps 8 bits of mantissa: the step and the parallel pass round apart
    # (each ~0.03 from float32 on logits of ~1.5 here, up to 0.12 from each other after
    # PoseNet's layer norms); a cache fault moves logits by their own size.
    check_decoder_contract(model, source, histories, beam_size=2, swap_at=3, atol=0.2)


def test_the_contract_check_fails_on_a_broken_cache():
    # A decoder whose state forgets the reorder: the check must notice.
    model = build_model(small_config("convs2s"))
    model(model.dummy_inputs())
    step = model.decoder.step

    def forgetful(tokens, position, state, *args, **kwargs):
        logits, attention, new_state = step(tokens, position, state, *args, **kwargs)
        return (
            logits,
            attention,
            tf.nest.map_structure(lambda leaf: tf.reverse(leaf, [0]), new_state),
        )

    model.decoder.step = forgetful
    rng = np.random.default_rng(1)
    histories = rng.integers(4, VOCAB, size=(4, 5))
    histories[:, 0] = 2
    with pytest.raises(AssertionError):
        check_decoder_contract(model, rng.integers(4, VOCAB, size=(2, 4)), histories)


POSENET_SWITCHES = [
    {"cross_attention": "after", "decoder_timing": "every_layer"},
    {"decoder_self_attention": False, "decoder_timing": "none", "ffn_layers": 0},
    {"encoder_self_attention": True, "groups": 2, "encoder_timing": "input"},
    {"encoder_dilations": "1.1.1.1", "ffn_layers": 3},
    {"norm_placement": "pre", "encoder_self_attention": True},
    {"norm_placement": "pre", "cross_attention": "after", "ffn_layers": 0},
    # SliceNet's own: super-separable boxes (separability -2) and one token table.
    {"hidden_dim": 12, "groups": "3.2", "share_all_embeddings": True},
]


@pytest.mark.parametrize("switches", POSENET_SWITCHES, ids=lambda s: "-".join(s))
def test_posenet_keeps_the_decoder_contract_for_every_switch(switches):
    tf.keras.utils.set_random_seed(4)
    model = build_model({**small_config("posenet"), **switches})
    model(model.dummy_inputs())
    rng = np.random.default_rng(2)
    source = rng.integers(4, VOCAB, size=(2, 5))
    source[1, 3:] = 1  # padding
    histories = rng.integers(4, VOCAB, size=(4, 6))
    histories[:, 0] = 2
    check_decoder_contract(model, source, histories, beam_size=2, swap_at=3)


def test_fairseq_export_refuses_posenet_in_one_line():
    from convs2s_tf.interop.fairseq_export import FairseqExportError, check_exportable

    with pytest.raises(FairseqExportError, match="^fairseq's fconv holds ConvS2S models only"):
        check_exportable(small_config("posenet"))
    check_exportable(small_config("convs2s"))  # no error


def test_every_family_gives_attention_maps():
    for family in list_families():
        model = build_model(small_config(family))
        model(model.dummy_inputs())
        source = tf.constant([[5, 6, 7, 2]])
        target_input = tf.constant([[2, 8, 9]])
        maps = model.attention_maps(source, target_input)
        assert maps and all(weights.shape == (1, 3, 4) for _, weights in maps)
        for _, weights in maps:
            np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, atol=1e-5)


def test_posenet_shares_one_token_table_and_groups_each_box_as_slicenet():
    config = {**small_config("posenet"), "hidden_dim": 12, "groups": "3.2"}
    separate, shared = (
        build_model({**config, "share_all_embeddings": share}) for share in (False, True)
    )
    for model in (separate, shared):
        model(model.dummy_inputs())
    assert shared.encoder.token_embedding is shared.decoder.token_embedding
    # One table fewer: VOCAB x 12 parameters.
    assert separate.count_params() - shared.count_params() == VOCAB * 12
    names = [variable.path for variable in shared.trainable_variables]
    assert len(names) == len(set(names))
    box = shared.encoder.encoder_layers[0].box_2
    assert [conv.groups for conv in box.convs] == [3, 2]
    with pytest.raises(ValueError, match="one vocabulary for both sides"):
        build_model({**config, "share_all_embeddings": True, "source_vocab_size": VOCAB + 1})
    with pytest.raises(ValueError, match="groups is a positive integer"):
        build_model({**config, "groups": "3.2.1"})
    with pytest.raises(ValueError, match="does not split into groups=5.2"):
        build_model({**config, "groups": "5.2"})
