"""Conversion of fairseq `fconv` translation checkpoints into runs of this project.

The authors' implementation (fairseq's `FConvModel`) computes what `ConvS2S` computes,
parameter for parameter, so a checkpoint maps onto the Keras model without loss:

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

Checkpoints saved with PyTorch's parametrized weight norm
(`torch.nn.utils.parametrizations.weight_norm`) store `weight_g` as
`parametrizations.weight.original0` and `weight_v` as `parametrizations.weight.original1`;
both spellings are read.

Both implementations use `W = g * v / ||v||` with the norm per output unit, so `v` and
`g` are copied as they are. The GLU halves need no reordering (both take the first half
of the channels as the linear part), positions are numbered alike (`pad + 1 +` the
number of non-pad tokens before, pads at `pad`), and ids are fairseq's: `<s>`, `<pad>`,
`</s>`, `<unk>` then `dict.txt` order. Weight norms stored in another layout (decoders
of fairseq's first versions normalised their convolutions per kernel tap; models saved
after `remove_weight_norm` hold a plain `weight`) are re-parametrised to give the same
effective kernel.

Checkpoints are read with `torch.load(weights_only=True)`: tensors, containers and
numbers only, plus `argparse.Namespace`, the form in which fairseq stores the model
arguments of every `fconv` checkpoint (it holds plain values). Any other object in the
file is refused, never unpickled. PyTorch is needed for reading only (`pip install
torch==2.13.0`, the CPU build); the converted run needs TensorFlow alone.
"""

import argparse
import collections
import json
import os
import re
import shutil

import numpy as np
import tensorflow as tf

from convs2s_tf.interop.fairseq_dictionary import Dictionary
from convs2s_tf.models import ConvS2S
from convs2s_tf.models.layer_spec import (
    LayerSpecError,
    format_layer_spec,
    parse_attention_spec,
    parse_layer_spec,
)
from convs2s_tf.vocabulary import PAD_ID

# The named architectures of fairseq's `fconv` model and the arguments each fills in
# when the checkpoint leaves them out (fairseq's `register_model_architecture`s).
_BASE_DEFAULTS = {
    "dropout": 0.1,
    "encoder_embed_dim": 512,
    "encoder_layers": "[(512, 3)] * 20",
    "decoder_embed_dim": 512,
    "decoder_layers": "[(512, 3)] * 20",
    "decoder_out_embed_dim": 256,
    "decoder_attention": "True",
    "share_input_output_embed": False,
}
_WMT_EN_DE_LAYERS = "[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2"
_WMT_EN_FR_LAYERS = (
    "[(512, 3)] * 6 + [(768, 3)] * 4 + [(1024, 3)] * 3 + [(2048, 1)] * 1 + [(4096, 1)] * 1"
)
FCONV_ARCHITECTURES = {
    "fconv": {},
    "fconv_iwslt_de_en": {
        "encoder_embed_dim": 256,
        "encoder_layers": "[(256, 3)] * 4",
        "decoder_embed_dim": 256,
        "decoder_layers": "[(256, 3)] * 3",
        "decoder_out_embed_dim": 256,
    },
    "fconv_wmt_en_ro": {"decoder_out_embed_dim": 512},
    "fconv_wmt_en_de": {
        "encoder_embed_dim": 768,
        "encoder_layers": _WMT_EN_DE_LAYERS,
        "decoder_embed_dim": 768,
        "decoder_layers": _WMT_EN_DE_LAYERS,
        "decoder_out_embed_dim": 512,
    },
    "fconv_wmt_en_fr": {
        "encoder_embed_dim": 768,
        "encoder_layers": _WMT_EN_FR_LAYERS,
        "decoder_embed_dim": 768,
        "decoder_layers": _WMT_EN_FR_LAYERS,
        "decoder_out_embed_dim": 512,
    },
}
# Buffers of fairseq's modules that carry no weights.
_IGNORED_KEYS = ("encoder.version", "decoder.version")
# PyTorch's parametrized weight norm (`torch.nn.utils.parametrizations.weight_norm`, which
# replaces the deprecated `torch.nn.utils.weight_norm` fairseq uses) saves a module's `g`
# and `v` under other names; they are renamed to fairseq's when the state dict is read.
_PARAMETRIZED_WEIGHT_NORM_NAMES = {
    "parametrizations.weight.original0": "weight_g",
    "parametrizations.weight.original1": "weight_v",
}
_SAFE_GLOBALS = (argparse.Namespace,)
CHECKPOINT_SUBDIR = "best"
SOURCE_DICT_FILE = "source_dict.txt"
TARGET_DICT_FILE = "target_dict.txt"
SENTENCEPIECE_FILE = "sentencepiece.model"
VOCABULARY_FORMAT = "fairseq_dictionary"


class FairseqImportError(ValueError):
    """A checkpoint, dictionary or output directory that cannot be converted, and why."""


ConversionResult = collections.namedtuple(
    "ConversionResult", ["output_dir", "checkpoint_path", "run_config", "architecture"]
)
ConversionResult.__doc__ = """What `convert_checkpoint` wrote.

Fields:
    output_dir: The run directory (`--model_dir` of the other pipelines).
    checkpoint_path: The TensorFlow checkpoint written under `output_dir/best/`.
    run_config: The content of `output_dir/config.json`.
    architecture: The fairseq architecture name found in the checkpoint.
"""


# ------------------------------------------------------------------ reading


def _import_torch():
    try:
        import torch
    except ImportError:
        raise FairseqImportError(
            "Reading fairseq checkpoints needs PyTorch, which is not installed: "
            "`pip install torch==2.13.0` (the CPU build; or `pip install -e .[parity]`)."
        ) from None
    return torch


def _unsafe_globals(torch, path):
    try:
        found = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # noqa: BLE001 (only used to word the error message)
        return []
    allowed = {f"{cls.__module__}.{cls.__qualname__}" for cls in _SAFE_GLOBALS}
    return [name for name in found if name not in allowed]


def _first_line(error):
    """The informative part of a torch.load error."""
    text = str(error)
    match = re.search(r"WeightsUnpickler error:\s*(.+?)\s*(?:\n\n|$)", text, re.S)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    detail = match.group(1) if match else (lines[0] if lines else "")
    return f"{type(error).__name__}: {detail}"


def read_checkpoint(path):
    """Reads a fairseq checkpoint file without unpickling arbitrary objects.

    Args:
        path: A `.pt` file written by fairseq (`checkpoint_best.pt`, a published
            `model.pt`, ...).

    Returns:
        The checkpoint dictionary (`"model"` holds the state dict of tensors).

    Raises:
        FileNotFoundError: `path` does not exist.
        FairseqImportError: The file holds objects other than tensors, containers,
            numbers, strings and the model arguments, or is not a checkpoint.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"fairseq checkpoint {path} does not exist.")
    torch = _import_torch()
    import pickle

    try:
        with torch.serialization.safe_globals(list(_SAFE_GLOBALS)):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        names = _unsafe_globals(torch, path)
        if not names:
            names = re.findall(r"GLOBAL (\S+) was not an allowed global", str(error))
        if not names:
            raise FairseqImportError(
                f"{path} is not a readable PyTorch checkpoint ({_first_line(error)})."
            ) from None
        found = ", ".join(names)
        raise FairseqImportError(
            f"{path} holds pickled Python objects besides tensors ({found}); reading it "
            "would mean executing code from the file, which this importer never does "
            "(torch.load(weights_only=True) refused it). Only the model arguments "
            "(argparse.Namespace) and the weights are needed: if you trust the file, "
            "re-save just those with PyTorch, e.g. state = torch.load(PATH, "
            "weights_only=False); torch.save({'args': state['args'] or "
            "state['cfg']['model'], 'model': state['model']}, 'clean.pt'), and convert "
            "clean.pt."
        ) from None
    except Exception as error:  # noqa: BLE001 (zip/format errors of every kind)
        raise FairseqImportError(
            f"{path} is not a readable PyTorch checkpoint ({_first_line(error)})."
        ) from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        keys = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise FairseqImportError(
            f"{path} is not a fairseq checkpoint: expected a dictionary with the model's "
            f"state dict under 'model', found {keys}."
        )
    return state


def _namespace_dict(value):
    if isinstance(value, argparse.Namespace):
        return dict(vars(value))
    if isinstance(value, dict):
        return dict(value)
    return None


def model_arguments(state):
    """The model arguments of a checkpoint: `args` (fairseq < 0.10) or `cfg["model"]`.

    Returns:
        `(architecture, arguments)`: the architecture name and a dict of arguments.

    Raises:
        FairseqImportError: No model arguments or no architecture name.
    """
    arguments = _namespace_dict(state.get("args"))
    if arguments is None:
        cfg = state.get("cfg")
        if isinstance(cfg, dict):
            arguments = _namespace_dict(cfg.get("model"))
    if arguments is None:
        raise FairseqImportError(
            "The checkpoint holds no model arguments ('args' or 'cfg.model'), which name "
            "its architecture and layer specs; it was not written by fairseq's trainer."
        )
    architecture = arguments.get("arch") or arguments.get("_name")
    if not architecture:
        raise FairseqImportError("The checkpoint's model arguments name no architecture.")
    return str(architecture), arguments


def check_architecture(architecture):
    """Raises `FairseqImportError` unless `architecture` is one of fairseq's `fconv`
    translation architectures."""
    if architecture not in FCONV_ARCHITECTURES:
        raise FairseqImportError(
            f"The checkpoint is of fairseq architecture {architecture!r}, not a "
            f"convolutional translation model; supported: {', '.join(FCONV_ARCHITECTURES)} "
            "(fconv_self_att, fconv_lm, transformers and others are different models)."
        )


def fconv_settings(architecture, arguments):
    """The `fconv` arguments, with the architecture's defaults where they are missing."""
    check_architecture(architecture)
    settings = dict(_BASE_DEFAULTS)
    settings.update(FCONV_ARCHITECTURES[architecture])
    for key in settings:
        if arguments.get(key) is not None:
            settings[key] = arguments[key]
    return settings


# ----------------------------------------------------------------- weights


def _numpy(tensor):
    return tensor.detach().cpu().float().numpy().astype(np.float64)


def weight_norm_name(key):
    """`key` with PyTorch's parametrized weight-norm spelling renamed to fairseq's.

    `<module>.parametrizations.weight.original0` (g) becomes `<module>.weight_g` and
    `<module>.parametrizations.weight.original1` (v) becomes `<module>.weight_v`; any
    other key is returned unchanged.
    """
    for parametrized, name in _PARAMETRIZED_WEIGHT_NORM_NAMES.items():
        if key.endswith("." + parametrized):
            return key[: -len(parametrized)] + name
    return key


class _StateDict:
    """The checkpoint's tensors as float64 arrays, tracking which keys were used.

    Weight-norm parameters are keyed by fairseq's names (`weight_g`, `weight_v`) in
    either spelling (see `weight_norm_name`); messages name the keys of the file.
    """

    def __init__(self, state_dict):
        self.tensors = {}
        self.file_keys = {}
        for key, value in state_dict.items():
            if not hasattr(value, "detach"):
                raise FairseqImportError(
                    f"Entry {key!r} of the checkpoint's model is a {type(value).__name__}, "
                    "not a tensor."
                )
            name = weight_norm_name(key)
            if name in self.tensors:
                raise FairseqImportError(
                    f"The checkpoint holds the same weight-norm parameter twice, as "
                    f"{self.file_keys[name]!r} and {key!r}; a module is weight-normalised "
                    "one way only."
                )
            self.tensors[name] = value
            self.file_keys[name] = key
        self.used = set()

    def __contains__(self, key):
        return key in self.tensors

    def get(self, key):
        if key not in self.tensors:
            raise FairseqImportError(f"The checkpoint has no parameter {key!r}.")
        self.used.add(key)
        return _numpy(self.tensors[key])

    def has_module(self, prefix):
        return any(key.startswith(prefix + ".") for key in self.tensors)

    def file_key(self, key):
        """The name the file gives `key` (itself if the file has no such key)."""
        return self.file_keys.get(key, key)

    def unused(self):
        names = set(self.tensors) - self.used - set(_IGNORED_KEYS)
        return sorted(self.file_keys[name] for name in names)


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


def _assign_blocks(side, model_side, state):
    for index, (projection, convolution) in enumerate(
        zip(model_side.projections, model_side.convolutions)
    ):
        has_projection = state.has_module(f"{side}.projections.{index}")
        if has_projection != (projection is not None):
            raise FairseqImportError(
                f"The {side}'s block {index} {'has' if has_projection else 'lacks'} a "
                "residual projection in the checkpoint, unlike its layer spec."
            )
        if projection is not None:
            _assign_dense(projection, state, f"{side}.projections.{index}")
        _assign_convolution(convolution, state, f"{side}.convolutions.{index}")


def assign_weights(model, state_dict):
    """Copies a fairseq `fconv` state dict into a built `ConvS2S` of matching config.

    Raises:
        FairseqImportError: A missing, misshapen or unexpected parameter, named.
    """
    state = _StateDict(state_dict)
    encoder, decoder = model.encoder, model.decoder
    _assign_embeddings("encoder", encoder, state)
    _assign_dense(encoder.input_projection, state, "encoder.fc1")
    _assign_blocks("encoder", encoder, state)
    _assign_dense(encoder.output_projection, state, "encoder.fc2")

    _assign_embeddings("decoder", decoder, state)
    _assign_dense(decoder.input_projection, state, "decoder.fc1")
    _assign_blocks("decoder", decoder, state)
    for index, attention in enumerate(decoder.attentions):
        prefix = f"decoder.attention.{index}"
        if state.has_module(prefix) != (attention is not None):
            raise FairseqImportError(
                f"The decoder's block {index} {'has' if attention is None else 'lacks'} "
                "attention in the checkpoint, unlike its decoder_attention argument."
            )
        if attention is not None:
            _assign_dense(attention.in_projection, state, prefix + ".in_projection")
            _assign_dense(attention.out_projection, state, prefix + ".out_projection")
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


# ------------------------------------------------------------ configuration


def _shape(state_dict, key):
    if key not in state_dict:
        raise FairseqImportError(f"The checkpoint has no parameter {key!r}.")
    return tuple(state_dict[key].shape)


def _shares_output_embedding(state_dict):
    """Whether decoder.fc3 is the decoder's token table (a tied, plain weight)."""
    if "decoder.fc3.weight" not in state_dict or "decoder.embed_tokens.weight" not in state_dict:
        return False
    table, output = state_dict["decoder.embed_tokens.weight"], state_dict["decoder.fc3.weight"]
    return tuple(table.shape) == tuple(output.shape) and bool((table == output).all())


def _layer_spec(settings, side):
    text = settings[f"{side}_layers"]
    try:
        return parse_layer_spec(text if isinstance(text, str) else repr(list(text)))
    except LayerSpecError as error:
        raise FairseqImportError(f"The checkpoint's {side}_layers: {error}") from None


def model_config(settings, state_dict, source_dictionary_size, target_dictionary_size):
    """The `ConvS2S` arguments of a checkpoint, checked against its tensors.

    Sizes of vocabularies and position tables come from the tensors themselves; the
    layer specs, attention placement, dropout and sharing from the arguments.

    Raises:
        FairseqImportError: The arguments and tensors disagree, the dictionaries do not
            match the embedding tables, or the model has no `ConvS2S` equivalent.
    """
    encoder_layers = _layer_spec(settings, "encoder")
    decoder_layers = _layer_spec(settings, "decoder")
    try:
        attention = parse_attention_spec(settings["decoder_attention"], len(decoder_layers))
    except LayerSpecError as error:
        raise FairseqImportError(f"The checkpoint's decoder_attention: {error}") from None
    source_rows, embed_dim = _shape(state_dict, "encoder.embed_tokens.weight")
    target_rows, decoder_embed_dim = _shape(state_dict, "decoder.embed_tokens.weight")
    if embed_dim != decoder_embed_dim:
        raise FairseqImportError(
            f"Encoder and decoder embeddings differ in width ({embed_dim} vs "
            f"{decoder_embed_dim}); ConvS2S attention needs one width."
        )
    for side, rows, size in (
        ("source", source_rows, source_dictionary_size),
        ("target", target_rows, target_dictionary_size),
    ):
        if rows != size:
            raise FairseqImportError(
                f"The {side} dictionary has {size} symbols (4 special ones and "
                f"{size - 4} lines) but the checkpoint's {side} embedding table has {rows} "
                f"rows: pass the {side} dict.txt the model was trained with (fairseq-"
                "preprocess writes it to the data-bin directory)."
            )
    shared = _shares_output_embedding(state_dict)
    if bool(settings["share_input_output_embed"]) and not shared:
        raise FairseqImportError(
            "share_input_output_embed is set but the checkpoint's decoder.fc3 is not the "
            "decoder's token table."
        )
    out_embed_dim = _shape(state_dict, "decoder.fc2.bias")[0]
    dropout = float(settings["dropout"])
    if not 0.0 <= dropout < 1.0:
        raise FairseqImportError(f"dropout={dropout} is outside [0, 1).")
    return {
        "source_vocab_size": source_rows,
        "target_vocab_size": target_rows,
        "embed_dim": embed_dim,
        "encoder_layers": format_layer_spec(encoder_layers),
        "decoder_layers": format_layer_spec(decoder_layers),
        "decoder_out_embed_dim": out_embed_dim,
        "decoder_attention": attention,
        "dropout": dropout,
        "max_source_positions": _shape(state_dict, "encoder.embed_positions.weight")[0],
        "max_target_positions": _shape(state_dict, "decoder.embed_positions.weight")[0],
        "share_decoder_input_output_embed": shared,
        "source_positions": True,
        "target_positions": True,
        "pad_id": PAD_ID,
    }


def build_model(config):
    """A built `ConvS2S` of `config` (every variable created)."""
    model = ConvS2S(**config)
    model(model.dummy_inputs())
    return model


def _jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return repr(value)


def load_fairseq_model(checkpoint_path, source_dictionary, target_dictionary):
    """Reads a fairseq `fconv` checkpoint into a `ConvS2S`.

    Args:
        checkpoint_path: The fairseq `.pt` file.
        source_dictionary: The source `Dictionary` (or the path of its dict.txt).
        target_dictionary: The target `Dictionary` (or path).

    Returns:
        `(model, config, architecture, arguments)`.
    """
    if isinstance(source_dictionary, str):
        source_dictionary = Dictionary.load(source_dictionary)
    if isinstance(target_dictionary, str):
        target_dictionary = Dictionary.load(target_dictionary)
    state = read_checkpoint(checkpoint_path)
    architecture, arguments = model_arguments(state)
    settings = fconv_settings(architecture, arguments)
    state_dict = state["model"]
    config = model_config(settings, state_dict, len(source_dictionary), len(target_dictionary))
    try:
        model = build_model(config)
    except ValueError as error:
        raise FairseqImportError(f"The checkpoint's model cannot be built: {error}") from None
    assign_weights(model, state_dict)
    return model, config, architecture, arguments


# ------------------------------------------------------------------ writing


def _check_sentencepiece(path, dictionaries):
    import sentencepiece as spm

    if not os.path.isfile(path):
        raise FileNotFoundError(f"SentencePiece model {path} does not exist.")
    try:
        processor = spm.SentencePieceProcessor(model_file=path)
    except Exception as error:  # noqa: BLE001 (sentencepiece raises plain errors)
        raise FairseqImportError(f"{path} is not a SentencePiece model ({error}).") from None
    pieces = {processor.id_to_piece(i) for i in range(processor.get_piece_size())}
    for name, dictionary in dictionaries:
        tokens = dictionary.symbols[4:]
        known = sum(token in pieces for token in tokens)
        if tokens and known < 0.5 * len(tokens):
            raise FairseqImportError(
                f"Only {known} of the {len(tokens)} tokens of the {name} dictionary are "
                f"pieces of {path}: the fairseq model was not trained on this SentencePiece "
                "model's pieces. Leave --sentencepiece_model out to translate pre-tokenised "
                "text."
            )


def convert_checkpoint(
    checkpoint_path, source_dict, target_dict, output_dir, sentencepiece_model=None
):
    """Converts a fairseq `fconv` checkpoint into a run directory of this project.

    The run directory holds `config.json`, the checkpoint in `best/`, the two
    dictionaries (fairseq format, ids unchanged) and, if given, the SentencePiece model
    the fairseq data was segmented with. `pipelines.translate`, `pipelines.evaluate` and
    `pipelines.export` take it as `--model_dir`; without a SentencePiece model they read
    and write space-separated tokens of the dictionaries, as fairseq does.

    Args:
        checkpoint_path: fairseq `.pt` checkpoint of an `fconv` translation model.
        source_dict: The source `dict.txt`.
        target_dict: The target `dict.txt` (the same file for a joined dictionary).
        output_dir: The run directory to create; it must not hold a run already.
        sentencepiece_model: Optional SentencePiece model whose pieces are the
            dictionaries' tokens (text is then segmented and detokenised in-graph).

    Returns:
        A `ConversionResult`.

    Raises:
        FileNotFoundError: An input file is missing.
        FairseqImportError: Anything that makes the conversion impossible, explained.
    """
    for path in (checkpoint_path, source_dict, target_dict):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} does not exist.")
    if os.path.exists(os.path.join(output_dir, "config.json")) or os.path.exists(
        os.path.join(output_dir, CHECKPOINT_SUBDIR)
    ):
        raise FairseqImportError(
            f"{output_dir} already holds a run (config.json or {CHECKPOINT_SUBDIR}/); choose "
            "another --output_dir or remove it."
        )
    source_dictionary = Dictionary.load(source_dict)
    target_dictionary = Dictionary.load(target_dict)
    if sentencepiece_model:
        _check_sentencepiece(
            sentencepiece_model, [("source", source_dictionary), ("target", target_dictionary)]
        )
    model, config, architecture, arguments = load_fairseq_model(
        checkpoint_path, source_dictionary, target_dictionary
    )
    os.makedirs(output_dir, exist_ok=True)
    shutil.copyfile(source_dict, os.path.join(output_dir, SOURCE_DICT_FILE))
    shutil.copyfile(target_dict, os.path.join(output_dir, TARGET_DICT_FILE))
    if sentencepiece_model:
        shutil.copyfile(sentencepiece_model, os.path.join(output_dir, SENTENCEPIECE_FILE))
    saved = tf.train.Checkpoint(model=model).save(
        os.path.join(os.path.abspath(output_dir), CHECKPOINT_SUBDIR, "ckpt")
    )
    run_config = {
        "model": config,
        # Relative paths resolve against the run directory.
        "sentencepiece_model": SENTENCEPIECE_FILE if sentencepiece_model else None,
        "vocabulary": {
            "format": VOCABULARY_FORMAT,
            "source": SOURCE_DICT_FILE,
            "target": TARGET_DICT_FILE,
        },
        "fairseq": {
            "checkpoint": os.path.abspath(checkpoint_path),
            "architecture": architecture,
            "arguments": _jsonable(arguments),
            "source_dict": os.path.abspath(source_dict),
            "target_dict": os.path.abspath(target_dict),
        },
    }
    with open(os.path.join(output_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(run_config, f, indent=2, sort_keys=True)
    return ConversionResult(output_dir, saved, run_config, architecture)
