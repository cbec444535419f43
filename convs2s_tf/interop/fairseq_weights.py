"""The correspondence of fairseq `fconv` parameters and `ConvS2S` variables, both ways.

The authors' implementation (fairseq's `FConvModel`) computes what `ConvS2S` computes,
so a checkpoint maps onto the Keras model without loss, and back:

* `{encoder,decoder}.embed_tokens.weight` `[V, f]` -> `token_embedding.embeddings`;
* `{encoder,decoder}.embed_positions.weight` `[P, f]` -> `position_embedding.embeddings`;
* every weight-normalised linear map (`fc1`, `fc2`, `projections.i`, `decoder.fc3`,
  `decoder.attention.i.{in,out}_projection`): `weight_v` `[out, in]` -> `kernel_v`
  `[in, out]` (transposed), `weight_g` `[out, 1]` -> `kernel_g` `[out]`, `bias` -> `bias`
  of the `WeightNormDense`;
* every convolution (`convolutions.i`, ConvTBC layout): `weight_v` `[k, in, 2c]` ->
  `kernel_v` (same layout), `weight_g` `[1, 1, 2c]` -> `kernel_g` `[2c]`, `bias` -> `bias`
  of the `WeightNormConv1D`;
* `decoder.fc3.bias` of a shared output embedding -> `decoder.output_bias` (its
  `decoder.fc3.weight` is `decoder.embed_tokens.weight`).

`fconv_modules` lists these modules of a model, once; `assign_weights` (import) and
`fairseq_state_dict` (export) both walk that list. Both implementations use
`W = g * v / ||v||` with the norm per output unit, so `v` and `g` are copied as they
are. The GLU halves need no reordering (both take the first half of the channels as the
linear part), positions are numbered alike (`pad + 1 +` the number of non-pad tokens
before, pads at `pad`), and ids are fairseq's: `<s>`, `<pad>`, `</s>`, `<unk>` then
`dict.txt` order. Weight norms stored in another layout (decoders of fairseq's first
versions normalised their convolutions per kernel tap; models saved after
`remove_weight_norm` hold a plain `weight`) are re-parametrised on import to give the
same effective kernel.
"""

import collections
from collections.abc import Mapping
from typing import Any

import numpy as np

from convs2s_tf.interop.fairseq_checkpoint import FairseqImportError, StateDict
from convs2s_tf.models import ConvS2S
from convs2s_tf.models.convs2s.conv_stack import ConvStack


def _effective_weight(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """`g * v / ||v||` for a weight norm stored with `g`'s shape (any `dim`)."""
    if g.ndim == v.ndim and all(size in (1, v.shape[axis]) for axis, size in enumerate(g.shape)):
        axes = tuple(axis for axis in range(v.ndim) if g.shape[axis] == 1)
    elif g.size == 1:
        g, axes = g.reshape((1,) * v.ndim), tuple(range(v.ndim))
    else:
        raise FairseqImportError(f"Weight-norm gain of shape {g.shape} for a weight {v.shape}.")
    return v * (g / np.sqrt(np.sum(v * v, axis=axes, keepdims=True)))


def _weight_norm_parameters(
    state: StateDict, prefix: str, output_axis: int
) -> tuple[np.ndarray, np.ndarray]:
    """`(v, g)` of a weight-normalised fairseq module, with `g` per output unit.

    The usual layout (`weight_g` normalising per output unit, fairseq's only one since
    2018) is returned unchanged; other layouts become `v = W`, `g = ||W||`. `g` and `v`
    are read in either spelling (`weight_g`/`weight_v` or PyTorch's
    `parametrizations.weight.original0`/`original1`), a plain `weight` (saved after
    `remove_weight_norm`) when there are neither.

    Raises:
        FairseqImportError: `g` without `v` or the reverse, or no weight at all, naming
            the keys looked for in both spellings.
    """
    has_g, has_v = f"{prefix}.weight_g" in state, f"{prefix}.weight_v" in state
    if has_g and has_v:
        v = state.get(f"{prefix}.weight_v")
        g = state.get(f"{prefix}.weight_g")
        per_output = [1] * v.ndim
        per_output[output_axis] = v.shape[output_axis]
        if list(g.shape) == per_output:
            return v, g.reshape(-1)
        weight = _effective_weight(g, v)
    elif has_g or has_v:
        found, missing = ("g", "v") if has_g else ("v", "g")
        index = 0 if missing == "g" else 1
        raise FairseqImportError(
            f"The checkpoint has the weight-norm {found} of {prefix} but not its {missing}: "
            f"neither {prefix}.weight_{missing} nor "
            f"{prefix}.parametrizations.weight.original{index}."
        )
    elif f"{prefix}.weight" in state:
        weight = state.get(f"{prefix}.weight")
    else:
        raise FairseqImportError(
            f"The checkpoint has no weight for {prefix}: neither {prefix}.weight_g and "
            f"{prefix}.weight_v (torch.nn.utils.weight_norm), nor "
            f"{prefix}.parametrizations.weight.original0 and .original1 "
            f"(torch.nn.utils.parametrizations.weight_norm), nor a plain {prefix}.weight."
        )
    axes = tuple(axis for axis in range(weight.ndim) if axis != output_axis)
    return weight, np.sqrt(np.sum(weight * weight, axis=axes))


# How fairseq's module maps onto a `ConvS2S` layer (`FairseqModule.kind`).
EMBEDDING = "embedding"  # `weight` <-> a Keras embedding's `embeddings`
LINEAR = "linear"  # weight-normalised `nn.Linear` <-> `WeightNormDense`
CONVOLUTION = "convolution"  # weight-normalised `ConvTBC` <-> `WeightNormConv1D`
TIED_OUTPUT = "tied_output"  # `decoder.fc3` of a shared embedding <-> `ConvDecoder.output_bias`

FairseqModule = collections.namedtuple("FairseqModule", ["name", "kind", "layer"])
FairseqModule.__doc__ = """One fairseq module of an `fconv` model and the layer holding it here.

Fields:
    name: fairseq's module path, e.g. `"decoder.attention.0.in_projection"`.
    kind: `EMBEDDING`, `LINEAR`, `CONVOLUTION` or `TIED_OUTPUT`.
    layer: The Keras layer with its variables (the `ConvDecoder` for `TIED_OUTPUT`).
"""

WeightNormLayout = collections.namedtuple("WeightNormLayout", ["output_axis", "permutation"])
WeightNormLayout.__doc__ = """Where a weight-normalised module's `weight_v` differs from `kernel_v`.

Fields:
    output_axis: The axis of `weight_v` over the output units; `weight_g` has the shape
        of `weight_v` with every other axis of size 1.
    permutation: The transposition taking `kernel_v` to `weight_v` (its own inverse).
"""
WEIGHT_NORM_LAYOUTS = {
    LINEAR: WeightNormLayout(output_axis=0, permutation=(1, 0)),
    CONVOLUTION: WeightNormLayout(output_axis=2, permutation=(0, 1, 2)),
}


def _stack_modules(side: str, stack: ConvStack) -> list[FairseqModule]:
    """The embeddings, `fc1`, residual projections, convolutions and attention of the
    encoder or decoder (`side`), in fairseq's order (its `ModuleList`s hold no entry where
    a block has no projection or attention)."""
    blocks = stack.blocks
    modules = [
        FairseqModule(f"{side}.embed_tokens", EMBEDDING, stack.token_embedding),
        FairseqModule(f"{side}.embed_positions", EMBEDDING, stack.position_embedding),
        FairseqModule(f"{side}.fc1", LINEAR, stack.input_projection),
    ]
    modules += [
        FairseqModule(f"{side}.projections.{index}", LINEAR, block.projection)
        for index, block in enumerate(blocks)
        if block.projection is not None
    ]
    modules += [
        FairseqModule(f"{side}.convolutions.{index}", CONVOLUTION, block.convolution)
        for index, block in enumerate(blocks)
    ]
    for index, block in enumerate(blocks):
        if block.attention is not None:
            prefix = f"{side}.attention.{index}"
            modules += [
                FairseqModule(f"{prefix}.in_projection", LINEAR, block.attention.in_projection),
                FairseqModule(f"{prefix}.out_projection", LINEAR, block.attention.out_projection),
            ]
    return modules


def fconv_modules(model: ConvS2S) -> list[FairseqModule]:
    """Every fairseq module of `model`'s parameters, in the order of fairseq's state dict.

    Args:
        model: A built `ConvS2S` with learned positions on both sides (fairseq's `fconv`
            always has them).

    Returns:
        A list of `FairseqModule`; together they hold every variable of `model`.
    """
    encoder, decoder = model.encoder, model.decoder
    modules = _stack_modules("encoder", encoder)
    modules.append(FairseqModule("encoder.fc2", LINEAR, encoder.output_projection))
    modules += _stack_modules("decoder", decoder)
    modules.append(FairseqModule("decoder.fc2", LINEAR, decoder.hidden_projection))
    if decoder.output_projection is not None:
        modules.append(FairseqModule("decoder.fc3", LINEAR, decoder.output_projection))
    else:
        modules.append(FairseqModule("decoder.fc3", TIED_OUTPUT, decoder))
    return modules


# ------------------------------------------------------------------------ import


def _assign(variable: Any, value: np.ndarray, key: str) -> None:
    value = np.asarray(value, np.float32)
    if tuple(variable.shape) != value.shape:
        raise FairseqImportError(
            f"Parameter {key!r} has shape {value.shape} where the model built from the "
            f"checkpoint's arguments expects {tuple(variable.shape)}."
        )
    variable.assign(value)


def _assign_module(module: FairseqModule, state: StateDict) -> None:
    """Copies one fairseq module's parameters from `state` into its layer."""
    name, kind, layer = module
    if kind == EMBEDDING:
        _assign(layer.embeddings, state.get(f"{name}.weight"), f"{name}.weight")
    elif kind == TIED_OUTPUT:
        table = state.get(f"{name}.weight")
        if not np.array_equal(table, state.get("decoder.embed_tokens.weight")):
            raise FairseqImportError(
                "share_input_output_embed is set but decoder.fc3.weight differs from "
                "decoder.embed_tokens.weight."
            )
        _assign(layer.output_bias, state.get(f"{name}.bias"), f"{name}.bias")
    else:
        layout = WEIGHT_NORM_LAYOUTS[kind]
        v, g = _weight_norm_parameters(state, name, layout.output_axis)
        _assign(layer.kernel_v, v.transpose(layout.permutation), state.file_key(f"{name}.weight_v"))
        _assign(layer.kernel_g, g, state.file_key(f"{name}.weight_g"))
        _assign(layer.bias, state.get(f"{name}.bias"), f"{name}.bias")


def _check_blocks(model: ConvS2S, state: StateDict) -> None:
    """Refuses residual projections and attention placed unlike the model's blocks (the
    checkpoint's arguments and tensors disagree), naming the block."""
    for side, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        for index, block in enumerate(stack.blocks):
            has_projection = state.has_module(f"{side}.projections.{index}")
            if has_projection != (block.projection is not None):
                raise FairseqImportError(
                    f"The {side}'s block {index} {'has' if has_projection else 'lacks'} a "
                    "residual projection in the checkpoint, unlike its layer spec."
                )
            has_attention = state.has_module(f"{side}.attention.{index}")
            if side == "decoder" and has_attention != (block.attention is not None):
                raise FairseqImportError(
                    f"The decoder's block {index} {'has' if has_attention else 'lacks'} "
                    "attention in the checkpoint, unlike its decoder_attention argument."
                )


def assign_weights(model: ConvS2S, state_dict: Mapping[str, Any]) -> None:
    """Copies a fairseq `fconv` state dict into a built `ConvS2S` of matching config.

    Raises:
        FairseqImportError: A missing, misshapen or unexpected parameter, named.
    """
    state = StateDict(state_dict)
    _check_blocks(model, state)
    for module in fconv_modules(model):
        _assign_module(module, state)
    unused = state.unused()
    if unused:
        raise FairseqImportError(
            f"The checkpoint has parameters an fconv model does not: {', '.join(unused[:10])}"
            f"{' ...' if len(unused) > 10 else ''}."
        )


# ------------------------------------------------------------------------ export


def _value(variable: Any) -> np.ndarray:
    return np.asarray(variable.numpy(), np.float32)


def module_parameters(module: FairseqModule) -> dict[str, np.ndarray]:
    """One fairseq module's state-dict entries, from its layer's variables.

    Args:
        module: A `FairseqModule` (see `fconv_modules`).

    Returns:
        A dict from fairseq's parameter names to float32 arrays in fairseq's layouts,
        in its order (`bias`, `weight_g`, `weight_v` of a weight-normalised module).
    """
    name, kind, layer = module
    if kind == EMBEDDING:
        return {f"{name}.weight": _value(layer.embeddings)}
    if kind == TIED_OUTPUT:
        # fairseq ties the parameter itself: both names hold the decoder's token table.
        table = _value(layer.token_embedding.embeddings)
        return {f"{name}.weight": table, f"{name}.bias": _value(layer.output_bias)}
    layout = WEIGHT_NORM_LAYOUTS[kind]
    v = _value(layer.kernel_v).transpose(layout.permutation)
    g_shape = [1] * v.ndim
    g_shape[layout.output_axis] = v.shape[layout.output_axis]
    return {
        f"{name}.bias": _value(layer.bias),
        f"{name}.weight_g": _value(layer.kernel_g).reshape(g_shape),
        f"{name}.weight_v": np.ascontiguousarray(v),
    }
