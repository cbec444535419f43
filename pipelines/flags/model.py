"""The model flags: a preset and per-field overrides."""

import inspect
from typing import Any

from absl import flags

from pipelines.flags.groups import FLAGS, MODEL, flag_group


@flag_group(MODEL)
def define_model_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """Defines the architecture flags: a preset, optional per-field overrides and the
    position tables' sizes."""
    if "preset" in flag_values:
        return
    from convs2s_tf.models.families import DEFAULT_FAMILY, get_family, list_families

    flags.DEFINE_enum(
        "family",
        DEFAULT_FAMILY,
        list_families(),
        "Model family (convs2s_tf/models/families.py); --preset names one of its presets.",
        flag_values=flag_values,
    )
    presets = sorted(
        {name for family in list_families() for name in get_family(family).list_presets()}
    )
    flags.DEFINE_enum(
        "preset",
        "multi30k_cpu",
        presets,
        "Architecture preset (convs2s_tf/models/convs2s/presets.py); the flags below "
        "override fields.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "embed_dim", None, "Embedding width f (overrides the preset).", flag_values=flag_values
    )
    flags.DEFINE_string(
        "encoder_layers",
        None,
        "Encoder layer spec, e.g. '[(512,3)]*9 + [(1024,3)]*4' (overrides the preset).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "decoder_layers",
        None,
        "Decoder layer spec (overrides the preset).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "decoder_out_embed_dim",
        None,
        "Decoder width before the vocabulary projection (overrides the preset).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "decoder_attention",
        None,
        "Decoder blocks with attention: True, False or a list like '[True, False]*2'.",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "dropout",
        None,
        "Dropout drop probability (overrides the preset; paper 0.1-0.2).",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "share_decoder_input_output_embed",
        None,
        "Tie the decoder's output projection to its token table (needs out embed == embed).",
        flag_values=flag_values,
    )
    _define_position_flags(flag_values)


def _define_position_flags(flag_values: flags.FlagValues) -> None:
    flags.DEFINE_bool(
        "source_positions",
        None,
        "Add learned source positions (default on).",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "target_positions",
        None,
        "Add learned target positions (default on).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "max_source_positions",
        1024,
        "Source positions of the model; longer training pairs are dropped and counted, "
        "longer evaluation sources truncated (a sequence with </s> may have "
        "max_source_positions - 2 tokens).",
        lower_bound=3,
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "max_target_positions",
        1024,
        "Target positions of the model; as --max_source_positions for the target side.",
        lower_bound=3,
        flag_values=flag_values,
    )


_MODEL_OVERRIDES = (
    "embed_dim",
    "encoder_layers",
    "decoder_layers",
    "decoder_out_embed_dim",
    "decoder_attention",
    "dropout",
    "share_decoder_input_output_embed",
    "source_positions",
    "target_positions",
)


def model_config_from_flags(
    vocab_size: int, flag_values: flags.FlagValues = FLAGS
) -> dict[str, Any]:
    """The model config (`config.json`'s "model"): the family, its preset's constructor
    arguments overridden by the flags that are set."""
    from convs2s_tf.models.families import get_family, with_family

    family = get_family(flag_values.family)
    if flag_values.preset not in family.list_presets():
        raise flags.ValidationError(
            f"--preset={flag_values.preset} is not a preset of --family={family.name} "
            f"(its presets: {', '.join(family.list_presets())})."
        )
    config = family.get_preset(flag_values.preset)
    arguments = inspect.signature(family.model_class.__init__).parameters
    for name in _MODEL_OVERRIDES:
        value = flag_values[name].value
        if value is None:
            continue
        if name not in arguments:
            raise flags.ValidationError(
                f"--{name} does not apply to --family={family.name} (it sets a "
                f"{family.model_class.__name__} argument it does not have)."
            )
        config[name] = value
    config.update(
        source_vocab_size=vocab_size,
        target_vocab_size=vocab_size,
        max_source_positions=flag_values.max_source_positions,
        max_target_positions=flag_values.max_target_positions,
    )
    try:
        # Validates the combination (specs, shared embedding sizes, ...) without building.
        config = family.model_class(**config).get_config()
    except ValueError as error:
        raise flags.ValidationError(f"Invalid model flags: {error}") from None
    for key in ("name", "trainable", "dtype"):
        config.pop(key, None)
    return with_family(family.name, config)
