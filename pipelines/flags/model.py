"""The model flags: a preset and per-field overrides."""

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
        "Architecture preset of --family (models/<family>/presets.py); the flags below "
        "override its fields.",
        flag_values=flag_values,
    )
    _define_family_flags(flag_values)
    _define_position_flags(flag_values)


_DEFINE = {
    "string": flags.DEFINE_string,
    "integer": flags.DEFINE_integer,
    "float": flags.DEFINE_float,
    "bool": flags.DEFINE_bool,
}


def _define_family_flags(flag_values: flags.FlagValues) -> None:
    """Defines every family's overrides once; a name two families share says what it
    sets in each."""
    from convs2s_tf.models.families import get_family, list_families

    declared: dict[str, list[tuple[str, Any]]] = {}
    for family in list_families():
        for model_flag in get_family(family).model_flags:
            declared.setdefault(model_flag.name, []).append((family, model_flag))
    for name, owners in declared.items():
        kinds = {model_flag.kind for _, model_flag in owners}
        if len(kinds) > 1:
            raise ValueError(f"Model families disagree on the type of --{name}: {kinds}.")
        if len(owners) == 1:
            family, model_flag = owners[0]
            help_text = f"{model_flag.help} (--family={family}; overrides the preset)."
        else:
            parts = "; ".join(f"{family}: {model_flag.help}" for family, model_flag in owners)
            help_text = f"{parts} (overrides the preset)."
        kind = owners[0][1].kind
        if kind == "enum":
            values = sorted({value for _, flag in owners for value in flag.enum_values})
            flags.DEFINE_enum(name, None, values, help_text, flag_values=flag_values)
        else:
            _DEFINE[kind](name, None, help_text, flag_values=flag_values)


def _define_position_flags(flag_values: flags.FlagValues) -> None:
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


def _override_names() -> list[str]:
    from convs2s_tf.models.families import get_family, list_families

    names = (flag.name for family in list_families() for flag in get_family(family).model_flags)
    return list(dict.fromkeys(names))


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
    own = {model_flag.name: model_flag for model_flag in family.model_flags}
    for name in _override_names():
        value = flag_values[name].value
        if value is None:
            continue
        if name not in own:
            raise flags.ValidationError(
                f"--{name} does not apply to --family={family.name} (its flags: "
                f"{', '.join('--' + key for key in own)})."
            )
        parse = own[name].parse
        try:
            config[name] = value if parse is None else parse(value)
        except ValueError as error:
            raise flags.ValidationError(f"--{name}={value}: {error}") from None
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
