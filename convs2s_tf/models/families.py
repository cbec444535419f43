"""The model families: name -> model class, presets, summary and fairseq support.

A family is one folder of `convs2s_tf/models/` (ConvS2S: `models/convs2s/`) whose
`family.py` registers it here; `convs2s_tf/models/__init__.py` imports the shipped ones
(so does any import of this module, through its package). A run's model config
(`config.json`'s `"model"`) names its family under `"family"`; a config without one is
ConvS2S (as an imported fairseq run's).
Everything that builds a model from a config goes through `build_model`, so a new
family trains, decodes, exports and serves without a change elsewhere
(docs/extending.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import keras
import tensorflow as tf

# The key of a model config that names its family, and the family of configs without it.
FAMILY_KEY = "family"
DEFAULT_FAMILY = "convs2s"


@runtime_checkable
class TranslationModel(Protocol):
    """What training reads of a model of any family (the search's needs are
    `convs2s_tf.decoding.decoder_protocol.SearchableModel`).

    Attributes:
        decoder: has `pad_id`, the padding id of the targets.
    """

    decoder: Any

    def output_features(self, inputs: Mapping[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        """Returns the inputs of the vocabulary projection, `[B, T, width]`, of a batch's
        "source" and "target_input"."""

    def unbiased_output_logits(self, features: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Returns `(logits, bias)` of `[tokens, width]` features: the product in the
        compute dtype and the float32 bias, added by the loss in its own pass."""

    def dummy_inputs(self) -> dict[str, tf.Tensor]:
        """Returns a one-token batch that builds every variable."""

    def attention_maps(
        self, source: tf.Tensor, target_input: tf.Tensor
    ) -> list[tuple[str, tf.Tensor]]:
        """Returns `(name, [B, T, S] weights)` of each attention module, teacher-forced."""


@dataclasses.dataclass(frozen=True)
class ModelFlag:
    """A command-line override of one constructor argument of a family's model.

    Families may declare the same flag name (`--dropout`, `--encoder_layers`); they must
    then agree on its `kind`, and each gives its own `parse` and `help`.

    Attributes:
        name: the flag's and the constructor argument's name.
        kind: the absl flag type: "string", "integer", "float", "bool" or "enum".
        help: what the flag sets in this family.
        enum_values: the choices of an "enum" flag.
        parse: flag value -> constructor argument (None: the value itself); raises
            ValueError, with the reason, for a value the family cannot take.
    """

    name: str
    kind: str
    help: str
    enum_values: tuple[str, ...] = ()
    parse: Callable[[Any], Any] | None = None


@dataclasses.dataclass(frozen=True)
class ModelFamily:
    """A kind of model the toolkit can train, decode and export.

    Attributes:
        name: the family's name in configs and on the command line (`--family`).
        model_class: the Keras model; its constructor takes the config's other keys and
            its `get_config()` gives them back.
        list_presets: the family's named architectures.
        get_preset: preset name -> constructor arguments (without the vocabularies).
        format_summary: built model -> printable parameter counts per component.
        fairseq_refusal: None if `pipelines.export_fairseq` can write the family, else
            the one-line reason it cannot.
        model_flags: the overrides of preset fields it takes on the command line
            (`pipelines/flags/model.py` defines the union of every family's).
    """

    name: str
    model_class: type[keras.Model]
    list_presets: Callable[[], list[str]]
    get_preset: Callable[[str], dict[str, Any]]
    format_summary: Callable[[keras.Model], str]
    fairseq_refusal: str | None = None
    model_flags: tuple[ModelFlag, ...] = ()


_FAMILIES: dict[str, ModelFamily] = {}


def register_family(family: ModelFamily) -> ModelFamily:
    """Registers `family` under its name.

    Raises:
        ValueError: if a family of that name is registered already.
    """
    if family.name in _FAMILIES:
        raise ValueError(f"Model family {family.name!r} is already registered.")
    _FAMILIES[family.name] = family
    return family


def get_family(name: str) -> ModelFamily:
    """Returns the family called `name`.

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    if name not in _FAMILIES:
        raise ValueError(f"Unknown model family {name!r}; known: {', '.join(list_families())}.")
    return _FAMILIES[name]


def list_families() -> list[str]:
    """Returns the registered families' names, sorted."""
    return sorted(_FAMILIES)


def family_of(model_config: Mapping[str, Any]) -> ModelFamily:
    """Returns the family a model config names (ConvS2S if it names none)."""
    return get_family(model_config.get(FAMILY_KEY, DEFAULT_FAMILY))


def model_arguments(model_config: Mapping[str, Any]) -> dict[str, Any]:
    """Returns the constructor arguments of a model config (it without its family)."""
    return {key: value for key, value in model_config.items() if key != FAMILY_KEY}


def with_family(family: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Returns the model config of `family`'s model with constructor `arguments`."""
    return {FAMILY_KEY: get_family(family).name, **model_arguments(arguments)}


def build_model(model_config: Mapping[str, Any]) -> keras.Model:
    """Returns the (unbuilt) model a config describes: its family's class, its arguments.

    Raises:
        ValueError: an unknown family, or arguments the family's model refuses.
    """
    return family_of(model_config).model_class(**model_arguments(model_config))
