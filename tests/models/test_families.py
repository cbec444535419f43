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
    with pytest.raises(ValueError, match="Unknown model family 'nope'; known: convs2s"):
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
