"""Keras layers: ConvS2S's weight-normalised maps, GLU, positions and attention, and
PoseNet's sinusoidal timing, separable convolutions, convolution boxes, multi-head
attention, feed-forward nets and residual norms."""

from convs2s_tf.layers.conv_box import ConvBox
from convs2s_tf.layers.frozen_kernels import fold_kernels, frozen_kernels, weight_norm_layers
from convs2s_tf.layers.glu import GLU
from convs2s_tf.layers.gradient_scale import GradientScale, scale_gradient
from convs2s_tf.layers.int8_kernel import Int8Kernel
from convs2s_tf.layers.learned_positional_embedding import LearnedPositionalEmbedding
from convs2s_tf.layers.multi_head_attention import MultiHeadAttention
from convs2s_tf.layers.multi_step_attention import MultiStepAttention
from convs2s_tf.layers.padded_normal import PaddedNormal
from convs2s_tf.layers.positionwise_ffn import PositionwiseFFN
from convs2s_tf.layers.random_bits_dropout import RandomBitsDropout
from convs2s_tf.layers.residual_norm import ResidualNorm
from convs2s_tf.layers.separable_conv1d import SeparableConv1D
from convs2s_tf.layers.sinusoidal_timing import SinusoidalTiming
from convs2s_tf.layers.weight_norm_conv1d import WeightNormConv1D
from convs2s_tf.layers.weight_norm_dense import WeightNormDense

__all__ = [
    "ConvBox",
    "GLU",
    "GradientScale",
    "Int8Kernel",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "MultiStepAttention",
    "PaddedNormal",
    "PositionwiseFFN",
    "RandomBitsDropout",
    "ResidualNorm",
    "SeparableConv1D",
    "SinusoidalTiming",
    "WeightNormConv1D",
    "WeightNormDense",
    "fold_kernels",
    "frozen_kernels",
    "scale_gradient",
    "weight_norm_layers",
]
