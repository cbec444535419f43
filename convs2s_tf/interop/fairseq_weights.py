"""Copying a fairseq `fconv` state dict into a `ConvS2S`, parameter for parameter.

The authors' implementation (fairseq's `FConvModel`) computes what `ConvS2S` computes,
so a checkpoint maps onto the Keras model without loss:

* `{encoder,decoder}.embed_tokens.weight` `[V, f]` -> `token_embedding.embeddings`;
* `{encoder,decoder}.embed_positions.weight` `[P, f]` -> `position_embedding.embeddings`;
* every weight-normalised linear map (`fc1`, `fc2`, `projections.i`, `decoder.fc3`,
  `decoder.attention.i.{in,out}_projection`): `weight_v` `[out, in]` -> `kernel_v`
  `[in, out]` (transposed), `weight_g` `[out, 1]` -> `kernel_g` `[out]`, `bias` -> `bias`
  of the `WeightNormDense`;
* every convolution (`convolutions.i`, ConvTBC layout): `weight_v` `[k, in, 2c]` ->
  `kernel_v` (same layout), `weight_g` `[1, 1, 2c]` -> `kernel_g` `[2c]`, `bias` -> `bias`
  of the `WeightNormConv1D`;
* `decoder.fc3.bias` of a shared output embedding -> `decoder.output_bias`.

Both implementations use `W = g * v / ||v||` with the norm per output unit, so `v` and
`g` are copied as they are. The GLU halves need no reordering (both take the first half
of the channels as the linear part), positions are numbered alike (`pad + 1 +` the
number of non-pad tokens before, pads at `pad`), and ids are fairseq's: `<s>`, `<pad>`,
`</s>`, `<unk>` then `dict.txt` order. Weight norms stored in another layout (decoders
of fairseq's first versions normalised their convolutions per kernel tap; models saved
after `remove_weight_norm` hold a plain `weight`) are re-parametrised to give the same
effective kernel.
"""

import numpy as np

from convs2s_tf.interop.fairseq_checkpoint import FairseqImportError, StateDict


def _effective_weight(g, v):
    """`g * v / ||v||` for a weight norm stored with `g`'s shape (any `dim`)."""
    if g.ndim == v.ndim and all(size in (1, v.shape[axis]) for axis, size in enumerate(g.shape)):
        axes = tuple(axis for axis in range(v.ndim) if g.shape[axis] == 1)
    elif g.size == 1:
        g, axes = g.reshape((1,) * v.ndim), tuple(range(v.ndim))
    else:
        raise FairseqImportError(f"Weight-norm gain of shape {g.shape} for a weight {v.shape}.")
    return v * (g / np.sqrt(np.sum(v * v, axis=axes, keepdims=True)))


def _weight_norm_parameters(state, prefix, output_axis):
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


def _assign(variable, value, key):
    value = np.asarray(value, np.float32)
    if tuple(variable.shape) != value.shape:
        raise FairseqImportError(
            f"Parameter {key!r} has shape {value.shape} where the model built from the "
            f"checkpoint's arguments expects {tuple(variable.shape)}."
        )
    variable.assign(value)


def _assign_dense(layer, state, prefix):
    v, g = _weight_norm_parameters(state, prefix, output_axis=0)
    _assign(layer.kernel_v, v.T, state.file_key(f"{prefix}.weight_v"))
    _assign(layer.kernel_g, g, state.file_key(f"{prefix}.weight_g"))
    _assign(layer.bias, state.get(f"{prefix}.bias"), f"{prefix}.bias")


def _assign_convolution(layer, state, prefix):
    v, g = _weight_norm_parameters(state, prefix, output_axis=2)
    _assign(layer.kernel_v, v, state.file_key(f"{prefix}.weight_v"))
    _assign(layer.kernel_g, g, state.file_key(f"{prefix}.weight_g"))
    _assign(layer.bias, state.get(f"{prefix}.bias"), f"{prefix}.bias")


def _assign_embeddings(side, model_side, state):
    """`embed_tokens` and `embed_positions` of the encoder or decoder (`side`)."""
    prefix = side
    _assign(
        model_side.token_embedding.embeddings,
        state.get(f"{prefix}.embed_tokens.weight"),
        f"{prefix}.embed_tokens.weight",
    )
    _assign(
        model_side.position_embedding.embeddings,
        state.get(f"{prefix}.embed_positions.weight"),
        f"{prefix}.embed_positions.weight",
    )


def _assign_block(side, index, block, state):
    """Block `index` of `side` (a `ConvBlock`) from fairseq's `projections.<index>`,
    `convolutions.<index>` and, in the decoder, `attention.<index>`."""
    prefix = f"{side}.projections.{index}"
    has_projection = state.has_module(prefix)
    if has_projection != (block.projection is not None):
        raise FairseqImportError(
            f"The {side}'s block {index} {'has' if has_projection else 'lacks'} a "
            "residual projection in the checkpoint, unlike its layer spec."
        )
    if block.projection is not None:
        _assign_dense(block.projection, state, prefix)
    _assign_convolution(block.convolution, state, f"{side}.convolutions.{index}")
    if side != "decoder":
        return
    prefix = f"decoder.attention.{index}"
    if state.has_module(prefix) != (block.attention is not None):
        raise FairseqImportError(
            f"The decoder's block {index} {'has' if block.attention is None else 'lacks'} "
            "attention in the checkpoint, unlike its decoder_attention argument."
        )
    if block.attention is not None:
        _assign_dense(block.attention.in_projection, state, prefix + ".in_projection")
        _assign_dense(block.attention.out_projection, state, prefix + ".out_projection")


def _assign_stack(side, stack, state):
    """Embeddings, `fc1` and the blocks of the encoder or decoder (`side`)."""
    _assign_embeddings(side, stack, state)
    _assign_dense(stack.input_projection, state, f"{side}.fc1")
    for index, block in enumerate(stack.blocks):
        _assign_block(side, index, block, state)


def assign_weights(model, state_dict):
    """Copies a fairseq `fconv` state dict into a built `ConvS2S` of matching config.

    Raises:
        FairseqImportError: A missing, misshapen or unexpected parameter, named.
    """
    state = StateDict(state_dict)
    encoder, decoder = model.encoder, model.decoder
    _assign_stack("encoder", encoder, state)
    _assign_dense(encoder.output_projection, state, "encoder.fc2")
    _assign_stack("decoder", decoder, state)
    _assign_dense(decoder.hidden_projection, state, "decoder.fc2")
    if decoder.output_projection is not None:
        _assign_dense(decoder.output_projection, state, "decoder.fc3")
    else:
        table = state.get("decoder.fc3.weight")
        if not np.array_equal(table, state.get("decoder.embed_tokens.weight")):
            raise FairseqImportError(
                "share_input_output_embed is set but decoder.fc3.weight differs from "
                "decoder.embed_tokens.weight."
            )
        _assign(decoder.output_bias, state.get("decoder.fc3.bias"), "decoder.fc3.bias")
    unused = state.unused()
    if unused:
        raise FairseqImportError(
            f"The checkpoint has parameters an fconv model does not: {', '.join(unused[:10])}"
            f"{' ...' if len(unused) > 10 else ''}."
        )
