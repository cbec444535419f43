"""Generic Keras layers: weight-normalised maps, GLU, learned positions, multi-step
attention, dropout and gradient scaling. A family's own layers live in its folder
(PoseNet's in `convs2s_tf.models.posenet`)."""

from convs2s_tf.layers.folded_kernels import FoldedKernels, fold_kernels, weight_norm_layers
from convs2s_tf.layers.glu import GLU
from convs2s_tf.layers.gradient_scale import GradientScale, scale_gradient
from convs2s_tf.layers.int8_kernel import Int8Kernel
from convs2s_tf.layers.learned_positional_embedding import LearnedPositionalEmbedding
from convs2s_tf.layers.multi_step_attention import MultiStepAttention
from convs2s_tf.layers.padded_normal import PaddedNormal
from convs2s_tf.layers.random_bits_dropout import RandomBitsDropout
from convs2s_tf.layers.weight_norm_conv1d import WeightNormConv1D
from convs2s_tf.layers.weight_norm_dense import WeightNormDense

__all__ = [
    "FoldedKernels",
    "GLU",
    "GradientScale",
    "Int8Kernel",
    "LearnedPositionalEmbedding",
    "MultiStepAttention",
    "PaddedNormal",
    "RandomBitsDropout",
    "WeightNormConv1D",
    "WeightNormDense",
    "fold_kernels",
    "scale_gradient",
    "weight_norm_layers",
]
