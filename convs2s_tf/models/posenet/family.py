"""Registers PoseNet as the model family "posenet"."""

from convs2s_tf.models.families import ModelFamily, register_family
from convs2s_tf.models.posenet.posenet import PoseNet
from convs2s_tf.models.posenet.presets import get_preset, list_presets
from convs2s_tf.models.posenet.summary import format_summary

POSENET = register_family(
    ModelFamily(
        name="posenet",
        model_class=PoseNet,
        list_presets=list_presets,
        get_preset=get_preset,
        format_summary=format_summary,
        fairseq_refusal=(
            "fairseq's fconv holds ConvS2S models only: a PoseNet run cannot be exported "
            "to fairseq."
        ),
    )
)
