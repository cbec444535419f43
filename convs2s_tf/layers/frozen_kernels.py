"""Weight-normalised kernels computed once for a whole decoding loop."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import keras
import tensorflow as tf

from convs2s_tf.layers.weight_norm_conv1d import WeightNormConv1D
from convs2s_tf.layers.weight_norm_dense import WeightNormDense


def weight_norm_layers(model: keras.layers.Layer) -> list[WeightNormDense | WeightNormConv1D]:
    """The built weight-normalised layers of `model`, in a fixed order."""
    return [
        layer
        for layer in model._flatten_layers(include_self=True, recursive=True)
        if isinstance(layer, (WeightNormDense, WeightNormConv1D)) and layer.built
    ]


def fold_kernels(model: keras.layers.Layer) -> list[tf.Tensor]:
    """Each weight-normalised layer's effective kernel, in its compute dtype, as a list
    matching `weight_norm_layers(model)` (for `frozen_kernels(model, kernels)`)."""
    return [tf.cast(layer.kernel, layer.compute_dtype) for layer in weight_norm_layers(model)]


@contextlib.contextmanager
def frozen_kernels(
    model: keras.layers.Layer, kernels: Sequence[tf.Tensor | tf.Variable] | None = None
) -> Iterator[None]:
    """Within the block, every weight-normalised layer of `model` uses one kernel tensor.

    A layer's effective kernel `g * v / ||v||` is otherwise recomputed at every call; in
    a traced decoding loop that means once per generated position, for every layer
    (the output projection alone is `out_embed_dim x vocabulary`). Entering computes each
    kernel once, in the layer's compute dtype, where the block is traced (outside the
    loop), or takes them from `kernels`; the layers use those tensors until the block
    ends. For inference only: no gradient reaches `v` and `g` through them.

    Args:
        model: A Keras layer or model; all its weight-normalised sublayers are frozen.
        kernels: Optional precomputed kernels (tensors or variables), as `fold_kernels`
            returns them; by default they are computed on entry.

    Example:

    >>> from convs2s_tf.decoding import SearchConfig, beam_search
    >>> from convs2s_tf.models import ConvS2S
    >>> model = ConvS2S(20, 20, embed_dim=8, encoder_layers="[(8, 3)]",
    ...                 decoder_layers="[(8, 3)]", decoder_out_embed_dim=8)
    >>> model.build()
    >>> with frozen_kernels(model):
    ...     output = beam_search(
    ...         model, tf.constant([[5, 6, 2]]), SearchConfig(beam_size=2, max_len_b=4)
    ...     )
    >>> output.tokens.shape[:2]
    TensorShape([1, 1])
    """
    layers = weight_norm_layers(model)
    for layer in layers:
        layer.frozen_kernel = None
    if kernels is None:
        kernels = fold_kernels(model)
    if len(kernels) != len(layers):
        raise ValueError(
            f"{len(kernels)} kernels given for {len(layers)} weight-normalised layers."
        )
    for layer, kernel in zip(layers, kernels):
        if tuple(kernel.shape) != tuple(layer.kernel_v.shape):
            raise ValueError(
                f"Kernel of shape {kernel.shape} given for {layer.name} of shape "
                f"{layer.kernel_v.shape}."
            )
        layer.frozen_kernel = tf.convert_to_tensor(kernel)
    try:
        yield
    finally:
        for layer in layers:
            layer.frozen_kernel = None
