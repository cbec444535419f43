"""The PoseNet family (docs/posenet.md): encoder, decoder, the Keras model, presets, its
own layers (timing, separable convolutions, boxes, multi-head attention, feed-forward
nets, residual norms), approx BLEU and the comparison helpers."""

from convs2s_tf.models.posenet.posenet import PoseNet
from convs2s_tf.models.posenet.posenet_decoder import PoseNetDecoder
from convs2s_tf.models.posenet.posenet_decoder_step import PoseNetMemory
from convs2s_tf.models.posenet.posenet_encoder import PoseNetEncoder, PoseNetEncoderOutput
from convs2s_tf.models.posenet.presets import get_preset, list_presets, register_preset

__all__ = [
    "PoseNet",
    "PoseNetDecoder",
    "PoseNetEncoder",
    "PoseNetEncoderOutput",
    "PoseNetMemory",
    "get_preset",
    "list_presets",
    "register_preset",
]
