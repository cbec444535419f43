"""Kernels folded once for inference and handed to the layers that use them.

At inference a weight-normalised layer's kernel `g * v / ||v||` would otherwise be
recomputed at every call (in a decoding loop, once per generated position), and a
decoder whose output projection is its token table would read that table transposed at
every step. `FoldedKernels` holds each foldable layer's kernel computed once (or taken
from variables, or as `Int8Kernel`s); the layers' inference calls take it as their
`kernels` argument (`layer(x, kernels=kernels)`, `decoder.step(..., kernels=kernels)`),
so what a call computes with is visible at its call site. Without it, a layer computes
its kernel from its variables (training, which needs their gradients).
`convs2s_tf.decoding.make_inference_model` pairs a model with its `FoldedKernels`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Union

import keras
import tensorflow as tf

from convs2s_tf.layers.int8_kernel import Int8Kernel

# A kernel as `FoldedKernels` takes it: a tensor, a variable, or an `Int8Kernel` of them.
KernelValue = Union[tf.Tensor, tf.Variable, Int8Kernel]


class WeightNormFolding:
    """What folding asks of a weight-normalised layer (a mixin of `WeightNormDense` and
    `WeightNormConv1D`, which define `kernel_v`, `kernel_g` and the effective `kernel`):
    its kernel is folded once for a whole decoding loop."""

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
        """The variables `fold_kernel()` stands for at inference: `v` and `g`."""
        return [self.kernel_v, self.kernel_g]

    def fold_kernel(self) -> tf.Tensor:
        """The effective kernel in the compute dtype."""
        return tf.cast(self.kernel, self.compute_dtype)

    def compute_kernel(self, kernels: FoldedKernels | None) -> tf.Tensor:
        """The kernel to compute with, in the compute dtype: this layer's in `kernels`
        (an `Int8Kernel` dequantised), else the effective kernel of the variables."""
        folded = kernels.float_kernel(self, self.compute_dtype) if kernels is not None else None
        return tf.cast(self.kernel, self.compute_dtype) if folded is None else folded


class TiedTableFolding:
    """What folding asks of a decoder whose output projection is its token table (a
    mixin of `ConvDecoder` and `PoseNetDecoder`, which define `output_table_is_tied` and
    `token_embedding`): the table is folded once for a decoding loop, transposed.

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
        """Whether the token table is folded (when it is the projection)."""
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


def _sublayers(value: Any) -> Iterator[keras.layers.Layer]:
    """The layers `value` holds in public attributes, lists, tuples, dicts and
    dataclasses, depth first."""
    if isinstance(value, keras.layers.Layer):
        yield value
        value = {k: v for k, v in vars(value).items() if not k.startswith("_")}
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _sublayers(item)


def foldable_layers(model: keras.layers.Layer) -> list[keras.layers.Layer]:
    """The built layers of `model` (itself included, each once) with a kernel to fold, in
    a fixed order: those whose `folds_kernel` is true (weight-normalised layers, and
    decoders whose output projection is their token table), found through public
    attributes (a layer, or lists, tuples, dicts and dataclasses of them)."""
    layers: dict[int, keras.layers.Layer] = {}
    for layer in _sublayers(model):
        if getattr(layer, "folds_kernel", False) and layer.built:
            layers.setdefault(id(layer), layer)
    return list(layers.values())


def weight_norm_layers(model: keras.layers.Layer) -> list[keras.layers.Layer]:
    """The built weight-normalised layers of `model`, in a fixed order."""
    return [layer for layer in foldable_layers(model) if isinstance(layer, WeightNormFolding)]


def fold_kernels(model: keras.layers.Layer) -> list[tf.Tensor]:
    """Each foldable layer's kernel (`fold_kernel()`, in its compute dtype), as a list
    matching `foldable_layers(model)`: what `FoldedKernels.of(model, kernels)` takes."""
    return [layer.fold_kernel() for layer in foldable_layers(model)]


class FoldedKernels:
    """One kernel for each foldable layer of a model, computed once: what the layers'
    inference calls compute with when passed as their `kernels` argument.

    A value holds tensors of the graph it was made in: make it where the search is
    traced (outside its loop, so the kernels are computed once per trace), from the
    model (`FoldedKernels.of(model)`) or from kernels kept in variables. For inference
    only: no gradient reaches the variables through the folded kernels.

    Args:
        layers: The foldable layers (`foldable_layers(model)`).
        kernels: One kernel per layer, in order (tensors or variables, read here, or
            `Int8Kernel`s of them: the layers' step products then round their rows to
            int8 with `Int8Kernel.product`, and any other use reads the dequantised
            kernel).

    Raises:
        ValueError: As many kernels as layers are needed, each of its layer's
            `folded_kernel_shape`.

    Example:

    >>> from convs2s_tf.models import ConvS2S
    >>> model = ConvS2S(20, 20, embed_dim=8, encoder_layers="[(8, 3)]",
    ...                 decoder_layers="[(8, 3)]", decoder_out_embed_dim=8)
    >>> model.build()
    >>> kernels = FoldedKernels.of(model)
    >>> len(kernels) == len(weight_norm_layers(model))
    True
    >>> output = model.encode(tf.constant([[5, 6, 2]]), kernels=kernels)
    """

    def __init__(
        self, layers: Sequence[keras.layers.Layer], kernels: Sequence[KernelValue]
    ) -> None:
        if len(kernels) != len(layers):
            raise ValueError(f"{len(kernels)} kernels given for {len(layers)} foldable layers.")
        self._kernels: dict[int, tuple[keras.layers.Layer, tf.Tensor | Int8Kernel]] = {}
        for layer, kernel in zip(layers, kernels):
            if tuple(kernel.shape) != tuple(layer.folded_kernel_shape):
                raise ValueError(
                    f"Kernel of shape {kernel.shape} given for {layer.name} of shape "
                    f"{layer.folded_kernel_shape}."
                )
            value = (
                kernel.as_tensors()
                if isinstance(kernel, Int8Kernel)
                else tf.convert_to_tensor(kernel)
            )
            # Keyed by identity; the layer is kept so that its id is never reused.
            self._kernels[id(layer)] = (layer, value)

    @classmethod
    def of(
        cls, model: keras.layers.Layer, kernels: Sequence[KernelValue] | None = None
    ) -> FoldedKernels:
        """The kernels of `model`'s foldable layers: `kernels` (as `fold_kernels`
        returns them, or `Int8Kernel`s of them), or by default folded now."""
        return cls(foldable_layers(model), fold_kernels(model) if kernels is None else kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def kernel(self, layer: keras.layers.Layer) -> tf.Tensor | Int8Kernel | None:
        """`layer`'s folded kernel (a tensor or an `Int8Kernel`), or None if it has none."""
        entry = self._kernels.get(id(layer))
        return entry[1] if entry is not None else None

    def float_kernel(self, layer: keras.layers.Layer, dtype: tf.DType | str) -> tf.Tensor | None:
        """`kernel(layer)` as a float tensor in `dtype` (an `Int8Kernel` dequantised), or
        None."""
        kernel = self.kernel(layer)
        if isinstance(kernel, Int8Kernel):
            return kernel.dequantize(dtype)
        return kernel
