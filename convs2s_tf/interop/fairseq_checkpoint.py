"""Reading fairseq `fconv` checkpoints: the file, the model arguments, the tensors.

Checkpoints are read with `torch.load(weights_only=True)`: tensors, containers and
numbers only, plus `argparse.Namespace`, the form in which fairseq stores the model
arguments of every `fconv` checkpoint (it holds plain values). Any other object in the
file is refused, never unpickled. PyTorch is needed for reading only (`pip install
torch==2.13.0`, the CPU build); the converted run needs TensorFlow alone.

Checkpoints saved with PyTorch's parametrized weight norm
(`torch.nn.utils.parametrizations.weight_norm`) store `weight_g` as
`parametrizations.weight.original0` and `weight_v` as `parametrizations.weight.original1`;
`StateDict` reads both spellings under fairseq's names.
"""

import argparse
import os
import pickle
import re
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from convs2s_tf.models import fairseq_architectures, fairseq_preset

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
# fairseq's names of the `ConvS2S` arguments its architectures set (`fairseq_preset`),
# read by the importer and written by the exporter.
FCONV_ARGUMENTS = {
    "dropout": "dropout",
    "encoder_embed_dim": "embed_dim",
    "encoder_layers": "encoder_layers",
    "decoder_embed_dim": "embed_dim",
    "decoder_layers": "decoder_layers",
    "decoder_out_embed_dim": "decoder_out_embed_dim",
    "decoder_attention": "decoder_attention",
    "share_input_output_embed": "share_decoder_input_output_embed",
}
FCONV_ARCHITECTURES = fairseq_architectures()


class FairseqImportError(ValueError):
    """A checkpoint, dictionary or output directory that cannot be converted, and why."""


def import_torch(error_class: type[Exception] = FairseqImportError) -> ModuleType:
    """The `torch` module; raises `error_class` with the install command if it is missing."""
    try:
        import torch
    except ImportError:
        raise error_class(
            "Reading and writing fairseq checkpoints needs PyTorch, which is not installed: "
            "`pip install torch==2.13.0` (the CPU build; or `pip install -e .[parity]`)."
        ) from None
    return torch


def _unsafe_globals(torch: ModuleType, path: str) -> list[str]:
    try:
        found = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # noqa: BLE001 (only used to word the error message)
        return []
    allowed = {f"{cls.__module__}.{cls.__qualname__}" for cls in _SAFE_GLOBALS}
    return [name for name in found if name not in allowed]


def _first_line(error: BaseException) -> str:
    """The informative part of a torch.load error."""
    text = str(error)
    match = re.search(r"WeightsUnpickler error:\s*(.+?)\s*(?:\n\n|$)", text, re.S)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    detail = match.group(1) if match else (lines[0] if lines else "")
    return f"{type(error).__name__}: {detail}"


def read_checkpoint(path: str) -> dict[str, Any]:
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
    torch = import_torch()
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


def _namespace_dict(value: object) -> dict[str, Any] | None:
    if isinstance(value, argparse.Namespace):
        return dict(vars(value))
    if isinstance(value, dict):
        return dict(value)
    return None


def model_arguments(state: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
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


def check_architecture(architecture: str) -> None:
    """Raises `FairseqImportError` unless `architecture` is one of fairseq's `fconv`
    translation architectures."""
    if architecture not in FCONV_ARCHITECTURES:
        raise FairseqImportError(
            f"The checkpoint is of fairseq architecture {architecture!r}, not a "
            f"convolutional translation model; supported: {', '.join(FCONV_ARCHITECTURES)} "
            "(fconv_self_att, fconv_lm, transformers and others are different models)."
        )


def fconv_settings(architecture: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The `fconv` arguments (fairseq's names), with the architecture's defaults (its
    preset, see `convs2s_tf.models.fairseq_preset`) where they are missing."""
    check_architecture(architecture)
    preset = fairseq_preset(architecture)
    settings = {name: preset[ours] for name, ours in FCONV_ARGUMENTS.items()}
    for key in settings:
        if arguments.get(key) is not None:
            settings[key] = arguments[key]
    return settings


def _numpy(tensor: Any) -> np.ndarray:
    return tensor.detach().cpu().float().numpy().astype(np.float64)


def weight_norm_name(key: str) -> str:
    """`key` with PyTorch's parametrized weight-norm spelling renamed to fairseq's.

    `<module>.parametrizations.weight.original0` (g) becomes `<module>.weight_g` and
    `<module>.parametrizations.weight.original1` (v) becomes `<module>.weight_v`; any
    other key is returned unchanged.
    """
    for parametrized, name in _PARAMETRIZED_WEIGHT_NORM_NAMES.items():
        if key.endswith("." + parametrized):
            return key[: -len(parametrized)] + name
    return key


class StateDict:
    """The checkpoint's tensors as float64 arrays, tracking which keys were used.

    Weight-norm parameters are keyed by fairseq's names (`weight_g`, `weight_v`) in
    either spelling (see `weight_norm_name`); messages name the keys of the file.
    """

    def __init__(self, state_dict: Mapping[str, Any]) -> None:
        self.tensors: dict[str, Any] = {}
        self.file_keys: dict[str, str] = {}
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
        self.used: set[str] = set()

    def __contains__(self, key: object) -> bool:
        return key in self.tensors

    def get(self, key: str) -> np.ndarray:
        if key not in self.tensors:
            raise FairseqImportError(f"The checkpoint has no parameter {key!r}.")
        self.used.add(key)
        return _numpy(self.tensors[key])

    def has_module(self, prefix: str) -> bool:
        return any(key.startswith(prefix + ".") for key in self.tensors)

    def file_key(self, key: str) -> str:
        """The name the file gives `key` (itself if the file has no such key)."""
        return self.file_keys.get(key, key)

    def unused(self) -> list[str]:
        names = set(self.tensors) - self.used - set(_IGNORED_KEYS)
        return sorted(self.file_keys[name] for name in names)
