"""Weight-normalised kernels computed once for a whole decoding loop."""

import contextlib

import tensorflow as tf

from convs2s_tf.layers.weight_norm_conv1d import WeightNormConv1D
from convs2s_tf.layers.weight_norm_dense import WeightNormDense


@contextlib.contextmanager
def frozen_kernels(model):
    """Within the block, every weight-normalised layer of `model` uses one kernel tensor.

    A layer's effective kernel `g * v / ||v||` is otherwise recomputed at every call; in
    a traced decoding loop that means once per generated position, for every layer
    (the output projection alone is `out_embed_dim x vocabulary`). Entering computes each
    kernel once, in the layer's compute dtype, where the block is traced (outside the
    loop); the layers use those tensors until the block ends. For inference only: the
    kernels are constants of the trace, so no gradient reaches `v` and `g` through them.

    Args:
        model: A Keras layer or model; all its weight-normalised sublayers are frozen.

    Example:

    >>> with frozen_kernels(model):
    ...     output = beam_search(model, source)
    """
    layers = [
        layer
        for layer in model._flatten_layers(include_self=True, recursive=True)
        if isinstance(layer, (WeightNormDense, WeightNormConv1D)) and layer.built
    ]
    for layer in layers:
        layer.frozen_kernel = None
        layer.frozen_kernel = tf.cast(layer.kernel, layer.compute_dtype)
    try:
        yield
    finally:
        for layer in layers:
            layer.frozen_kernel = None
