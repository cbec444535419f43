"""Tests of the architecture presets: the paper's configurations and fairseq's names."""

import pytest

from convs2s_tf.models import (
    ConvS2S,
    fairseq_architectures,
    fairseq_preset,
    get_preset,
    list_presets,
    parse_layer_spec,
)

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


def test_fairseq_architectures_are_the_presets():
    assert fairseq_architectures()[0] == "fconv"
    for name in ("iwslt_de_en", "wmt_en_ro", "wmt_en_de", "wmt_en_fr"):
        preset, fairseq = get_preset(name), fairseq_preset(f"fconv_{name}")
        assert {key: fairseq[key] for key in preset} == preset
        assert fairseq["dropout"] == 0.1 and fairseq["decoder_attention"] is True
    # fairseq's base architecture: wmt_en_ro's layers with a 256-wide output embedding.
    base = fairseq_preset("fconv")
    assert base["decoder_out_embed_dim"] == 256
    assert base["encoder_layers"] == get_preset("wmt_en_ro")["encoder_layers"]
    with pytest.raises(ValueError, match="Unknown fairseq fconv architecture 'fconv_lm'"):
        fairseq_preset("fconv_lm")
