"""Named PoseNet architectures (constructor arguments of `PoseNet`, without vocabularies)."""

from __future__ import annotations

from typing import Any

_PRESETS: dict[str, dict[str, Any]] = {}


def register_preset(name: str, **config: Any) -> dict[str, Any]:
    """Registers PoseNet architecture `name` with the given `PoseNet` arguments."""
    if name in _PRESETS:
        raise ValueError(f"PoseNet preset {name!r} is already registered.")
    _PRESETS[name] = dict(config)
    return _PRESETS[name]


def get_preset(name: str) -> dict[str, Any]:
    """The `PoseNet` arguments of preset `name` (a copy)."""
    if name not in _PRESETS:
        raise ValueError(f"Unknown PoseNet preset {name!r}; known: {', '.join(sorted(_PRESETS))}.")
    return dict(_PRESETS[name])


def list_presets() -> list[str]:
    """The names of the registered PoseNet presets, sorted."""
    return sorted(_PRESETS)


# The paper's depth (6 encoder, 5 decoder layers) with SliceNet's widths: hidden 768,
# 8 heads, attention dropout 0.2; the feed-forward width is the Transformer's 4x.
register_preset(
    "posenet_wmt",
    hidden_dim=768,
    encoder_layers=6,
    decoder_layers=5,
    num_heads=8,
    ffn_dim=3072,
    groups=2,
    dropout=0.2,
    attention_dropout=0.2,
)
# The paper's depth at the parameter count of configs/multi30k_en_de.cfg's ConvS2S
# (8,048,448 with an 8,000-piece vocabulary; this preset: 8,299,888, +3.1%), with the
# higher dropout a 29,000-pair corpus needs.
register_preset(
    "posenet_multi30k_cpu",
    hidden_dim=176,
    encoder_layers=6,
    decoder_layers=5,
    num_heads=8,
    ffn_dim=704,
    dropout=0.3,
    attention_dropout=0.1,
)
