"""What the fairseq export writes, without fairseq: architecture names, model configs,
parameter names and layouts, refusals. (tests/test_fairseq_export.py checks the export
against fairseq itself.)"""

import numpy as np
import pytest
from helpers.models import randomize_weights, varied_model

from convs2s_tf.interop.fairseq_dictionary import Dictionary, DictionaryError
from convs2s_tf.interop.fairseq_export import (
    FairseqExportError,
    check_exportable,
    fairseq_architecture,
    fairseq_state_dict,
    fconv_model_config,
)
from convs2s_tf.models import ConvS2S


@pytest.mark.parametrize(
    "preset, architecture",
    [
        ("iwslt_de_en", "fconv_iwslt_de_en"),
        ("multi30k_cpu", "fconv_iwslt_de_en"),  # dropout is no part of an architecture
        ("wmt_en_ro", "fconv_wmt_en_ro"),
        ("wmt_en_de", "fconv_wmt_en_de"),
        ("wmt_en_fr", "fconv_wmt_en_fr"),
    ],
)
def test_presets_are_named_by_their_fairseq_architecture(preset, architecture):
    # The model's config (not built: no weights are made) with the defaults filled in.
    config = ConvS2S.from_preset(preset, source_vocab_size=100, target_vocab_size=100).get_config()
    assert fairseq_architecture(config) == architecture


def test_other_models_are_plain_fconv_with_every_argument():
    config = varied_model().get_config()
    assert fairseq_architecture(config) == "fconv"
    model_config = fconv_model_config(config, "fconv")
    assert model_config["_name"] == model_config["arch"] == "fconv"
    assert model_config["encoder_layers"] == "[(12, 3), (12, 3), (16, 2, 2), (16, 5, 0)]"
    assert model_config["decoder_attention"] == "[True, False, True, False]"
    assert model_config["encoder_embed_dim"] == model_config["decoder_embed_dim"] == 8
    assert model_config["decoder_out_embed_dim"] == 10
    assert model_config["max_source_positions"] == 64
    assert model_config["share_input_output_embed"] is False


def test_state_dict_has_fairseqs_names_and_layouts():
    model = varied_model()
    randomize_weights(model, seed=1)
    state = fairseq_state_dict(model)
    assert list(state)[:4] == [
        "encoder.embed_tokens.weight",
        "encoder.embed_positions.weight",
        "encoder.fc1.bias",
        "encoder.fc1.weight_g",
    ]
    # A residual from another width needs a projection (fairseq's ModuleList holds None
    # for the others): encoder block 2 (12 -> 16); decoder blocks 1 (12 -> 16), 2 (from
    # two back, 12 -> 16) and 3 (16 -> 12).
    assert [name for name in state if ".projections." in name and name.endswith("bias")] == [
        "encoder.projections.2.bias",
        "decoder.projections.1.bias",
        "decoder.projections.2.bias",
        "decoder.projections.3.bias",
    ]
    assert [name for name in state if name.endswith("in_projection.bias")] == [
        "decoder.attention.0.in_projection.bias",
        "decoder.attention.2.in_projection.bias",
    ]
    np.testing.assert_array_equal(state["decoder.version"], [2.0])
    convolution = model.encoder.blocks[3].convolution  # (16, 5): ConvTBC [k, in, 2c]
    assert state["encoder.convolutions.3.weight_v"].shape == (5, 16, 32)
    assert state["encoder.convolutions.3.weight_g"].shape == (1, 1, 32)
    np.testing.assert_array_equal(state["encoder.convolutions.3.weight_v"], convolution.kernel_v)
    fc2 = model.decoder.hidden_projection  # nn.Linear [out, in]
    np.testing.assert_array_equal(state["decoder.fc2.weight_v"], fc2.kernel_v.numpy().T)
    np.testing.assert_array_equal(state["decoder.fc2.weight_g"][:, 0], fc2.kernel_g)
    assert all(value.dtype == np.float32 for value in state.values())


def test_tied_output_projection_is_the_token_table():
    model = ConvS2S(
        source_vocab_size=20,
        target_vocab_size=22,
        embed_dim=8,
        encoder_layers="[(8, 3)]",
        decoder_layers="[(8, 3)]",
        decoder_out_embed_dim=8,
        share_decoder_input_output_embed=True,
    )
    model(model.dummy_inputs())
    randomize_weights(model, seed=2)
    state = fairseq_state_dict(model)
    assert "decoder.fc3.weight_v" not in state
    np.testing.assert_array_equal(state["decoder.fc3.weight"], state["decoder.embed_tokens.weight"])
    np.testing.assert_array_equal(state["decoder.fc3.bias"], model.decoder.output_bias)


def test_refuses_models_without_positions_or_another_pad():
    config = varied_model().get_config()
    with pytest.raises(FairseqExportError, match="no target position embeddings"):
        check_exportable(dict(config, target_positions=False))
    with pytest.raises(FairseqExportError, match="pads with id 0"):
        check_exportable(dict(config, pad_id=0))
    check_exportable(config)


def test_dictionaries_with_line_breaks_cannot_be_written(tmp_path):
    with pytest.raises(DictionaryError, match="line break"):
        Dictionary.from_tokens(["a", "b\rc"]).save(str(tmp_path / "dict.txt"))
