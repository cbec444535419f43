"""Parameter counts per component of a PoseNet model."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from convs2s_tf.models.posenet.posenet import PoseNet


def _count(variables: Iterable[Any]) -> int:
    return int(sum(np.prod(v.shape) for v in variables))


def parameter_counts(model: PoseNet) -> list[tuple[str, int]]:
    """An ordered list of `(component, parameters)` for a built `PoseNet`."""
    rows = []
    for side, layers in (
        (model.encoder, model.encoder.encoder_layers),
        (model.decoder, model.decoder.decoder_layers),
    ):
        if side is model.decoder and model.decoder.token_embedding is model.encoder.token_embedding:
            rows.append(("decoder/token_embedding (the encoder's)", 0))
        else:
            rows.append((f"{side.name}/token_embedding", _count(side.token_embedding.weights)))
        roles: dict[str, int] = {}
        for layer in layers:
            for role, sublayer in vars(layer).items():
                if sublayer is not None:
                    roles[role] = roles.get(role, 0) + _count(sublayer.weights)
        rows += [(f"{side.name}/{role}", count) for role, count in roles.items()]
    rows.append(("decoder/output_bias", _count([model.decoder.output_bias])))
    return rows


def format_summary(model: PoseNet) -> str:
    """A printable table of `parameter_counts`, with the total."""
    if not model.built:
        model(model.dummy_inputs())
    rows = parameter_counts(model)
    total = _count(model.trainable_weights)
    width = max(len(name) for name, _ in rows)
    lines = [f"{'component'.ljust(width)}  {'parameters':>12}"]
    lines += [f"{name.ljust(width)}  {count:>12,}" for name, count in rows]
    lines.append(f"{'total'.ljust(width)}  {total:>12,}")
    return "\n".join(lines)
