"""Registers ConvS2S as the model family "convs2s" (the toolkit's default)."""

from convs2s_tf.models.convs2s.convs2s import ConvS2S
from convs2s_tf.models.convs2s.presets import get_preset, list_presets
from convs2s_tf.models.convs2s.summary import format_summary
from convs2s_tf.models.families import ModelFamily, ModelFlag, register_family

# Layer specs stay strings here: the model parses them (without eval) and names the
# problem in a bad one.
_FLAGS = (
    ModelFlag("embed_dim", "integer", "embedding width f"),
    ModelFlag("encoder_layers", "string", "encoder layer spec, e.g. '[(512,3)]*9 + [(1024,3)]*4'"),
    ModelFlag("decoder_layers", "string", "decoder layer spec"),
    ModelFlag("decoder_out_embed_dim", "integer", "decoder width before the vocabulary"),
    ModelFlag(
        "decoder_attention",
        "string",
        "decoder blocks with attention: True, False or a list like '[True, False]*2'",
    ),
    ModelFlag("dropout", "float", "dropout drop probability (paper 0.1-0.2)"),
    ModelFlag(
        "share_decoder_input_output_embed",
        "bool",
        "tie the output projection to the token table (needs out embed == embed)",
    ),
    ModelFlag("source_positions", "bool", "add learned source positions (default on)"),
    ModelFlag("target_positions", "bool", "add learned target positions (default on)"),
)

CONVS2S = register_family(
    ModelFamily(
        name="convs2s",
        model_class=ConvS2S,
        list_presets=list_presets,
        get_preset=get_preset,
        format_summary=format_summary,
        fairseq_refusal=None,
        model_flags=_FLAGS,
    )
)
