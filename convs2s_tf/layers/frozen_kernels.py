"""Kernels computed once for a whole decoding loop, rather than at every step."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import keras
import tensorflow as tf

from convs2s_tf.layers.int8_kernel import Int8Kernel

# The kernels frozen by `frozen_kernels`, by `id(layer)`, per thread: `translate_all`
# searches two batches at once from two threads, and each traces its own functions
# (tensors of one function's graph must not leak into another's).
_FROZEN = threading.local()


class WeightNormFolding:
    """What `frozen_kernels` asks of a weight-normalised layer (a mixin of
    `WeightNormDense` and `WeightNormConv1D`, which define `kernel_v`, `kernel_g` and the
    effective `kernel`): its kernel is folded once per decoding loop."""

    folds_kernel = True

    if TYPE_CHECKING:  # defined by the layers
        kernel_v: keras.Variable
        kernel_g: keras.Variable
        compute_dtype: str

        @property
        def kernel(self) -> tf.Tensor: ...

    @property
    def folded_kernel_shape(self) -> tuple[int, ...]:
        """The shape of `fold_kernel()`: the kernel's."""
        return tuple(self.kernel_v.shape)

    @property
    def folded_variables(self) -> list[keras.Variable]:
        """The variables `fold_kernel()` stands for while frozen: `v` and `g`."""
        return [self.kernel_v, self.kernel_g]

    def fold_kernel(self) -> tf.Tensor:
        """The effective kernel in the compute dtype (for `frozen_kernels`)."""
        return tf.cast(self.kernel, self.compute_dtype)


class TiedTableFolding:
    """What `frozen_kernels` asks of a decoder whose output projection is its token table
    (a mixin of `ConvDecoder` and `PoseNetDecoder`, which define `output_table_is_tied`
    and `token_embedding`): the table is folded once per decoding loop, transposed.

    A product with the `[vocab, dim]` table itself reads it across its rows; at a search
    step's few rows that took twice as long as the same product with the weights stored
    `[dim, vocab]` (docs/performance.md).
    """

    if TYPE_CHECKING:  # defined by the decoders
        token_embedding: keras.layers.Embedding
        compute_dtype: str

        @property
        def output_table_is_tied(self) -> bool: ...

    @property
    def folds_kernel(self) -> bool:
        """Whether `frozen_kernels` folds the token table (when it is the projection)."""
        return self.output_table_is_tied

    @property
    def folded_kernel_shape(self) -> tuple[int, ...]:
        """The shape of `fold_kernel()`: `(dim, vocab)`."""
        vocab, dim = self.token_embedding.embeddings.shape
        return (dim, vocab)

    @property
    def folded_variables(self) -> list[keras.Variable]:
        """None: the token table is still read by rows, for the embedding (reading its
        rows from the transpose would cost a strided gather of `dim` values per token)."""
        return []

    def fold_kernel(self) -> tf.Tensor:
        """The output projection as `[dim, vocab]` in the compute dtype."""
        return tf.transpose(tf.cast(self.token_embedding.embeddings, self.compute_dtype))


def frozen_kernel_of(layer: keras.layers.Layer) -> tf.Tensor | Int8Kernel | None:
    """The kernel `frozen_kernels` holds for `layer` in this thread (a tensor or an
    `Int8Kernel`), or None."""
    return getattr(_FROZEN, "kernels", {}).get(id(layer))


def frozen_float_kernel_of(layer: keras.layers.Layer, dtype: tf.DType | str) -> tf.Tensor | None:
    """`frozen_kernel_of(layer)` as a float tensor in `dtype` (an `Int8Kernel`
    dequantised), or None."""
    frozen = frozen_kernel_of(layer)
    if isinstance(frozen, Int8Kernel):
        return frozen.dequantize(dtype)
    return frozen


def foldable_layers(model: keras.layers.Layer) -> list[keras.layers.Layer]:
    """The built layers of `model` (itself included) with a kernel to fold, in a fixed
    order: those whose `folds_kernel` is true (weight-normalised layers, and decoders
    whose output projection is their token table)."""
    return [
        layer
        for layer in model._flatten_layers(include_self=True, recursive=True)
        if getattr(layer, "folds_kernel", False) and layer.built
    ]


def weight_norm_layers(model: keras.layers.Layer) -> list[keras.layers.Layer]:
    """The built weight-normalised layers of `model`, in a fixed order."""
    return [layer for layer in foldable_layers(model) if isinstance(layer, WeightNormFolding)]


def fold_kernels(model: keras.layers.Layer) -> list[tf.Tensor]:
    """Each foldable layer's kernel (`fold_kernel()`, in its compute dtype), as a list
    matching `foldable_layers(model)` (for `frozen_kernels(model, kernels)`)."""
    with _unfrozen():
        return [layer.fold_kernel() for layer in foldable_layers(model)]


@contextlib.contextmanager
def _unfrozen() -> Iterator[None]:
    previous = getattr(_FROZEN, "kernels", {})
    _FROZEN.kernels = {}
    try:
        yield
    finally:
        _FROZEN.kernels = previous


@contextlib.contextmanager
def frozen_kernels(
    model: keras.layers.Layer,
    kernels: Sequence[tf.Tensor | tf.Variable | Int8Kernel] | None = None,
) -> Iterator[None]:
    """Within the block, the foldable layers of `model` use one kernel tensor each.

    A weight-normalised layer's effective kernel `g * v / ||v||` is otherwise recomputed
    at every call; in a traced decoding loop that means once per generated position,
    for every layer. A decoder whose output projection is its token table would read
    that table transposed at every step, which at a few rows costs twice a product in
    order. Entering computes each kernel once (`fold_kernel()`: the effective kernel;
    the table transposed), in the layer's compute dtype, where the block is traced
    (outside the loop), or takes them from `kernels`; the layers use those tensors until
    the block ends. For inference only: no gradient reaches the variables through them.
    The kernels are this thread's: another thread tracing meanwhile is unaffected.

    Args:
        model: A Keras layer or model; all its foldable sublayers are frozen.
        kernels: Optional precomputed kernels (tensors or variables), as `fold_kernels`
            returns them, or `Int8Kernel`s of them: the layers' step products then
            round their rows to int8 (`Int8Kernel.product`), and any other use reads the
            dequantised kernel. By default the kernels are computed on entry.

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
    layers = foldable_layers(model)
    if kernels is None:
        kernels = fold_kernels(model)
    if len(kernels) != len(layers):
        raise ValueError(f"{len(kernels)} kernels given for {len(layers)} foldable layers.")
    frozen = {}
    for layer, kernel in zip(layers, kernels):
        if tuple(kernel.shape) != tuple(layer.folded_kernel_shape):
            raise ValueError(
                f"Kernel of shape {kernel.shape} given for {layer.name} of shape "
                f"{layer.folded_kernel_shape}."
            )
        frozen[id(layer)] = (
            kernel.as_tensors() if isinstance(kernel, Int8Kernel) else tf.convert_to_tensor(kernel)
        )
    previous = getattr(_FROZEN, "kernels", {})
    _FROZEN.kernels = {**previous, **frozen}
    try:
        yield
    finally:
        _FROZEN.kernels = previous
