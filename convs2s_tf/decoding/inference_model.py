"""A trained model made ready for generation: the model and its folded kernels.

`make_inference_model(model)` is the one step between a trained model and its search
(fairseq's `make_generation_fast_` plays the same part): it folds the kernels once
(`FoldedKernels`: each weight-normalised kernel `g * v / ||v||`, a tied output table
transposed) or takes them from the caller (variables of an export, `Int8Kernel`s),
and returns an `InferenceModel` whose `encode` and `decoder.step` pass them to the
layers. The search reads the `InferenceModel` as it reads a model (`SearchableModel`).

Kernels are tensors of the graph where the step is taken: a search makes its inference
model where it is traced, outside its loop, so each trace folds once and two threads
tracing at once each hold their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

import tensorflow as tf

from convs2s_tf.layers import FoldedKernels
from convs2s_tf.layers.folded_kernels import KernelValue

if TYPE_CHECKING:
    from convs2s_tf.decoding.ensemble import Ensemble
    from convs2s_tf.models import ConvS2S

    TrainedModel = Union[ConvS2S, Ensemble]

__all__ = ["InferenceDecoder", "InferenceModel", "make_inference_model"]


def _kernel_arguments(kernels: FoldedKernels) -> dict[str, FoldedKernels]:
    """The keyword arguments that pass `kernels` on: none when there are none, so a
    family with nothing to fold needs no `kernels` parameter (`SearchableModel`)."""
    return {"kernels": kernels} if len(kernels) else {}


class InferenceDecoder:
    """A model's decoder with the inference model's kernels: the `IncrementalDecoder`
    (and `ShortlistDecoder`) the search steps.

    A decoder that offers `read_step_weights()` (its step's weights, read and cast once:
    PoseNet's) has them read here, where the inference model is made (outside the
    search's loop), and passed to every step as `step_weights`.

    Args:
        decoder: The model's decoder.
        kernels: The model's `FoldedKernels`.
    """

    def __init__(self, decoder: Any, kernels: FoldedKernels) -> None:
        self.decoder = decoder
        self.kernels = kernels
        read = getattr(decoder, "read_step_weights", None)
        self._step_weights = {"step_weights": read()} if read is not None else {}
        self.vocab_size = decoder.vocab_size
        self.pad_id = decoder.pad_id
        self.max_length = decoder.max_length

    def initial_state(self, batch_size: int | tf.Tensor, positions: int | tf.Tensor = 0) -> Any:
        """The decoder's state before the first step."""
        return self.decoder.initial_state(batch_size, positions)

    def position_axes(self, incremental_state: Any) -> Any:
        """The decoder's position axes of `incremental_state`."""
        return self.decoder.position_axes(incremental_state)

    def step(
        self,
        tokens: tf.Tensor,
        step: int | tf.Tensor,
        incremental_state: Any,
        encoder_output: Any,
        beam_size: int = 1,
        output_subset: Any = None,
    ) -> tuple[tf.Tensor, tf.Tensor, Any]:
        """The decoder's `step` with the folded kernels."""
        return self.decoder.step(
            tokens,
            step,
            incremental_state,
            encoder_output,
            beam_size=beam_size,
            output_subset=output_subset,
            **_kernel_arguments(self.kernels),
            **self._step_weights,
        )

    def select_outputs(self, ids: tf.Tensor, valid: tf.Tensor) -> Any:
        """The decoder's `select_outputs` with the folded kernels."""
        return self.decoder.select_outputs(ids, valid, **_kernel_arguments(self.kernels))


class InferenceModel:
    """A trained model and its folded kernels, for generation (`make_inference_model`).

    Offers what the search reads of a model (`SearchableModel`): `encoder`, `decoder`
    (an `InferenceDecoder`) and `encode`, each computing with `kernels`.

    Args:
        model: A built `ConvS2S` (any family's model) or `Ensemble`.
        kernels: Its `FoldedKernels`.
    """

    def __init__(self, model: TrainedModel, kernels: FoldedKernels) -> None:
        self.model = model
        self.kernels = kernels
        self.encoder = model.encoder
        self.decoder = InferenceDecoder(model.decoder, kernels)

    def encode(self, source: tf.Tensor, training: bool = False) -> Any:
        """The model's encoder output of `source`, with the folded kernels."""
        return self.model.encode(source, training=training, **_kernel_arguments(self.kernels))

    def source_axes(self, encoder_output: Any) -> Any:
        """The model's source axes of `encoder_output`."""
        return self.model.source_axes(encoder_output)


# Python bookkeeping only: AutoGraph (a search traced with it) has nothing to convert here.
@tf.autograph.experimental.do_not_convert
def make_inference_model(
    model: TrainedModel | InferenceModel,
    kernels: Sequence[KernelValue] | None = None,
) -> InferenceModel:
    """`model` ready for generation: an `InferenceModel` holding its folded kernels.

    Call it where the search is traced (or run eagerly), outside any decoding loop: the
    kernels are then computed once for the whole search, never per step. For inference
    only: no gradient reaches the variables through the folded kernels.

    Args:
        model: A built `ConvS2S` or `Ensemble` (all its members' kernels are folded); an
            `InferenceModel` is returned as it is.
        kernels: Optional kernels kept by the caller, one per foldable layer as
            `fold_kernels(model)` lists them: tensors, variables, or `Int8Kernel`s of
            them (the layers' step products then round their rows to int8). By default
            they are folded now, from the model's current weights.

    Returns:
        The `InferenceModel`.

    Raises:
        ValueError: `kernels` of the wrong number or shapes.

    Example:

    >>> from convs2s_tf.decoding import SearchConfig, beam_search
    >>> from convs2s_tf.models import ConvS2S
    >>> model = ConvS2S(20, 20, embed_dim=8, encoder_layers="[(8, 3)]",
    ...                 decoder_layers="[(8, 3)]", decoder_out_embed_dim=8)
    >>> model.build()
    >>> inference = make_inference_model(model)
    >>> output = beam_search(
    ...     inference, tf.constant([[5, 6, 2]]), SearchConfig(beam_size=2, max_len_b=4)
    ... )
    >>> output.tokens.shape[:2]
    TensorShape([1, 1])
    """
    if isinstance(model, InferenceModel):
        if kernels is not None:
            raise ValueError("An InferenceModel holds its kernels already.")
        return model
    return InferenceModel(model, FoldedKernels.of(model, kernels))
