"""Named ConvS2S architectures, as in the authors' published configurations.

Each preset is a set of `ConvS2S` constructor arguments; `register_preset` adds new
ones. Layer specs are kept as text, exactly as the design document writes them, and
only here: `fairseq_preset` gives the same architectures under fairseq's names (the
checkpoint importer fills in what a checkpoint leaves out from them).
"""

from __future__ import annotations

from typing import Any

_PRESETS: dict[str, dict[str, Any]] = {}
# fairseq's `fconv` architectures (its `register_model_architecture`s): the preset each
# one is, and the arguments in which it differs. fairseq's base architecture `fconv` is
# wmt_en_ro with a 256-wide output embedding (`fconv_wmt_en_ro` only raises it to 512).
_FAIRSEQ_ARCHITECTURES: dict[str, tuple[str, dict[str, Any]]] = {
    "fconv": ("wmt_en_ro", {"decoder_out_embed_dim": 256}),
    "fconv_iwslt_de_en": ("iwslt_de_en", {}),
    "fconv_wmt_en_ro": ("wmt_en_ro", {}),
    "fconv_wmt_en_de": ("wmt_en_de", {}),
    "fconv_wmt_en_fr": ("wmt_en_fr", {}),
}
# What fairseq's base architecture sets besides the layers, as `ConvS2S` arguments.
_FAIRSEQ_BASE = {
    "dropout": 0.1,
    "decoder_attention": True,
    "share_decoder_input_output_embed": False,
}


def register_preset(name: str, **config: Any) -> dict[str, Any]:
    """Registers architecture `name` with the given `ConvS2S` arguments."""
    if name in _PRESETS:
        raise ValueError(f"Architecture preset {name!r} is already registered.")
    _PRESETS[name] = dict(config)
    return _PRESETS[name]


def get_preset(name: str) -> dict[str, Any]:
    """The `ConvS2S` arguments of preset `name` (a copy)."""
    if name not in _PRESETS:
        raise ValueError(
            f"Unknown architecture preset {name!r}; known: {', '.join(sorted(_PRESETS))}."
        )
    return dict(_PRESETS[name])


def list_presets() -> list[str]:
    """The names of the registered presets, sorted."""
    return sorted(_PRESETS)


def fairseq_architectures() -> tuple[str, ...]:
    """fairseq's `fconv` translation architecture names, base architecture first."""
    return tuple(_FAIRSEQ_ARCHITECTURES)


def fairseq_preset(architecture: str) -> dict[str, Any]:
    """The `ConvS2S` arguments fairseq's `architecture` defaults to.

    Args:
        architecture: One of `fairseq_architectures()`, e.g. `"fconv_wmt_en_de"`.

    Returns:
        A new dict with the embedding width, layer specs, output embedding width,
        dropout, attention placement and output-embedding sharing.

    Raises:
        ValueError: `architecture` is not one of fairseq's `fconv` architectures.
    """
    if architecture not in _FAIRSEQ_ARCHITECTURES:
        raise ValueError(
            f"Unknown fairseq fconv architecture {architecture!r}; known: "
            f"{', '.join(_FAIRSEQ_ARCHITECTURES)}."
        )
    name, overrides = _FAIRSEQ_ARCHITECTURES[architecture]
    return {**_FAIRSEQ_BASE, **get_preset(name), **overrides}


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
# small-data recipe) with the higher
# dropout a 29K-sentence corpus needs.
register_preset(
    "multi30k_cpu",
    embed_dim=256,
    encoder_layers="[(256, 3)] * 4",
    decoder_layers="[(256, 3)] * 3",
    decoder_out_embed_dim=256,
    dropout=0.3,
)

# Students for sequence-level distillation from a `multi30k_cpu` teacher (the same
# 256-wide embeddings, so they share its SentencePiece vocabulary and the shared output
# projection): a deeper encoder, which runs once per sentence over all positions, and a
# decoder of one or two narrow blocks, which runs once per generated token. A one-block
# decoder with 3 taps would see only the last 3 target tokens besides attention: its
# blocks take 5. The pilot budget that chose among them: docs/training.md.
_STUDENT_ENCODER = "[(256, 3)] * 8"
register_preset(
    "multi30k_student_d1",
    embed_dim=256,
    encoder_layers=_STUDENT_ENCODER,
    decoder_layers="[(128, 5)] * 1",
    decoder_out_embed_dim=256,
    dropout=0.3,
)
register_preset(
    "multi30k_student_d2",
    embed_dim=256,
    encoder_layers=_STUDENT_ENCODER,
    decoder_layers="[(128, 5)] * 2",
    decoder_out_embed_dim=256,
    dropout=0.3,
)
register_preset(
    "multi30k_student_d1_wide",
    embed_dim=256,
    encoder_layers=_STUDENT_ENCODER,
    decoder_layers="[(256, 5)] * 1",
    decoder_out_embed_dim=256,
    dropout=0.3,
)
