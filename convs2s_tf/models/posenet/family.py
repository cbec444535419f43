"""Registers PoseNet as the model family "posenet"."""

from convs2s_tf.models.families import ModelFamily, ModelFlag, register_family
from convs2s_tf.models.posenet.posenet import PoseNet
from convs2s_tf.models.posenet.presets import get_preset, list_presets
from convs2s_tf.models.posenet.summary import format_summary


def _layer_count(value: str) -> int:
    # ConvS2S's --encoder_layers is a layer spec, so the flag is a string for both.
    try:
        count = int(value)
    except ValueError:
        raise ValueError(f"PoseNet takes a number of layers, not {value!r}.") from None
    if count < 1:
        raise ValueError(f"PoseNet needs at least one layer, not {count}.")
    return count


_FLAGS = (
    ModelFlag("hidden_dim", "integer", "width d of both stacks"),
    ModelFlag("encoder_layers", "string", "encoder layers (the paper: 6)", parse=_layer_count),
    ModelFlag("decoder_layers", "string", "decoder layers (the paper: 5)", parse=_layer_count),
    ModelFlag("num_heads", "integer", "attention heads"),
    ModelFlag("ffn_dim", "integer", "inner width of the feed-forward nets"),
    ModelFlag("ffn_layers", "integer", "linear maps of each feed-forward net (0: none)"),
    ModelFlag(
        "groups",
        "string",
        "channel groups of each box's two separable convolutions: one number for both, or "
        "two joined by a dot (SliceNet's separability -2 is 3.2)",
    ),
    ModelFlag("encoder_dilations", "string", "encoder dilation scheme, e.g. 1.1.2.4"),
    ModelFlag("decoder_dilations", "string", "decoder dilation scheme (the paper: 1.1.1.1)"),
    ModelFlag(
        "encoder_timing",
        "enum",
        "position signal in every encoder layer or on its input only",
        enum_values=("every_layer", "input"),
    ),
    ModelFlag(
        "decoder_timing",
        "enum",
        "position signal in the decoder: none, once (on its input) or in every layer",
        enum_values=("none", "once", "every_layer"),
    ),
    ModelFlag(
        "cross_attention",
        "enum",
        "cross-attention before or after the decoder's convolution boxes",
        enum_values=("before", "after"),
    ),
    ModelFlag("decoder_self_attention", "bool", "masked self-attention in decoder layers"),
    ModelFlag("encoder_self_attention", "bool", "self-attention in encoder layers"),
    ModelFlag(
        "norm_placement",
        "enum",
        "each sub-layer's layer norm: post, the paper's norm(x + f(x)), or pre, x + f(norm(x))",
        enum_values=("post", "pre"),
    ),
    ModelFlag(
        "share_all_embeddings",
        "bool",
        "one token table for source, target and output (SliceNet's; a joint vocabulary)",
    ),
    ModelFlag("dropout", "float", "drop probability of embeddings and sub-layers"),
    ModelFlag("attention_dropout", "float", "drop probability of the attention weights"),
)

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
        model_flags=_FLAGS,
    )
)
