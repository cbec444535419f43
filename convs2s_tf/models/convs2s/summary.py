"""Parameter counts per component of a ConvS2S model."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from convs2s_tf.models.convs2s.convs2s import ConvS2S


def _count(variables: Iterable[Any]) -> int:
    return int(sum(np.prod(v.shape) for v in variables))


def parameter_counts(model: ConvS2S) -> list[tuple[str, int]]:
    """An ordered list of `(component, parameters)` for a built `ConvS2S`."""
    rows = []
    for side in (model.encoder, model.decoder):
        prefix = side.name
        rows.append((f"{prefix}/token_embedding", _count(side.token_embedding.weights)))
        if side.position_embedding is not None:
            rows.append((f"{prefix}/position_embedding", _count(side.position_embedding.weights)))
        rows.append((f"{prefix}/input_projection", _count(side.input_projection.weights)))
        rows.append(
            (f"{prefix}/convolutions", _count(v for c in side.convolutions for v in c.weights))
        )
        rows.append(
            (
                f"{prefix}/residual_projections",
                _count(v for p in side.projections if p is not None for v in p.weights),
            )
        )
        if side is model.decoder:
            rows.append(
                (
                    f"{prefix}/attention",
                    _count(v for a in side.attentions if a is not None for v in a.weights),
                )
            )
            rows.append((f"{prefix}/hidden_projection", _count(side.hidden_projection.weights)))
            output = (
                side.output_projection.weights
                if side.output_projection is not None
                else [side.output_bias]
            )
            rows.append((f"{prefix}/output_projection", _count(output)))
        else:
            rows.append(
                (f"{prefix}/output_projection", _count(model.encoder.output_projection.weights))
            )
    return rows


def format_summary(model: ConvS2S) -> str:
    """A printable table of `parameter_counts`, with the total."""
    if not model.built:
        model(model.dummy_inputs())
    rows = parameter_counts(model)
    total = _count(model.weights)
    width = max(len(name) for name, _ in rows)
    lines = [f"{'component'.ljust(width)}  {'parameters':>12}"]
    lines += [f"{name.ljust(width)}  {count:>12,}" for name, count in rows]
    lines.append(f"{'total'.ljust(width)}  {total:>12,}")
    return "\n".join(lines)
