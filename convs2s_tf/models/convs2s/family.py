"""Registers ConvS2S as the model family "convs2s" (the toolkit's default)."""

from convs2s_tf.models.convs2s.convs2s import ConvS2S
from convs2s_tf.models.convs2s.presets import get_preset, list_presets
from convs2s_tf.models.convs2s.summary import format_summary
from convs2s_tf.models.families import ModelFamily, register_family

CONVS2S = register_family(
    ModelFamily(
        name="convs2s",
        model_class=ConvS2S,
        list_presets=list_presets,
        get_preset=get_preset,
        format_summary=format_summary,
        fairseq_refusal=None,
    )
)
