"""Keras layers of ConvS2S: weight-normalised maps, GLU, positions and attention."""

from convs2s_tf.layers.frozen_kernels import fold_kernels, frozen_kernels, weight_norm_layers
from convs2s_tf.layers.glu import GLU
from convs2s_tf.layers.gradient_scale import GradientScale, scale_gradient
from convs2s_tf.layers.learned_positional_embedding import LearnedPositionalEmbedding
from convs2s_tf.layers.multi_step_attention import MultiStepAttention
from convs2s_tf.layers.padded_normal import PaddedNormal
from convs2s_tf.layers.random_bits_dropout import RandomBitsDropout
from convs2s_tf.layers.weight_norm_conv1d import WeightNormConv1D
from convs2s_tf.layers.weight_norm_dense import WeightNormDense

__all__ = [
    "GLU",
    "GradientScale",
    "LearnedPositionalEmbedding",
    "MultiStepAttention",
    "PaddedNormal",
    "RandomBitsDropout",
    "WeightNormConv1D",
    "WeightNormDense",
    "fold_kernels",
    "frozen_kernels",
    "scale_gradient",
    "weight_norm_layers",
]
