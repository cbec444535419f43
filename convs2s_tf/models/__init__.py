"""The model families (`families`: registry and `build_model`) and ConvS2S, the default
family (`convs2s/`: blocks, encoder, decoder, the Keras model, presets, spec parsing),
and PoseNet (`posenet/`, docs/posenet.md)."""

from convs2s_tf.models.convs2s.conv_block import ConvBlock
from convs2s_tf.models.convs2s.conv_decoder import ConvDecoder
from convs2s_tf.models.convs2s.conv_encoder import ConvEncoder
from convs2s_tf.models.convs2s.conv_stack import ConvStack
from convs2s_tf.models.convs2s.convs2s import ConvS2S
from convs2s_tf.models.convs2s.encoder_output import EncoderOutput
from convs2s_tf.models.convs2s.family import CONVS2S
from convs2s_tf.models.convs2s.layer_spec import (
    LayerSpec,
    LayerSpecError,
    format_layer_spec,
    parse_attention_spec,
    parse_layer_spec,
)
from convs2s_tf.models.convs2s.presets import (
    fairseq_architectures,
    fairseq_preset,
    get_preset,
    list_presets,
    register_preset,
)
from convs2s_tf.models.convs2s.summary import format_summary, parameter_counts
from convs2s_tf.models.families import (
    ModelFamily,
    ModelFlag,
    build_model,
    family_of,
    get_family,
    list_families,
    register_family,
)
from convs2s_tf.models.posenet.family import POSENET
from convs2s_tf.models.posenet.posenet import PoseNet

__all__ = [
    "CONVS2S",
    "POSENET",
    "PoseNet",
    "ConvBlock",
    "ConvDecoder",
    "ConvEncoder",
    "ConvS2S",
    "ConvStack",
    "EncoderOutput",
    "LayerSpec",
    "LayerSpecError",
    "ModelFamily",
    "ModelFlag",
    "build_model",
    "family_of",
    "get_family",
    "list_families",
    "register_family",
    "fairseq_architectures",
    "fairseq_preset",
    "format_layer_spec",
    "format_summary",
    "get_preset",
    "list_presets",
    "parameter_counts",
    "parse_attention_spec",
    "parse_layer_spec",
    "register_preset",
]
