"""What the comparison of PoseNet with ConvS2S reports (`benchmarks/family_comparison.py`):
parameter counts, training rates read from a console, and the table of the arms."""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Mapping
from typing import Any

import keras
import numpy as np

# An epoch's line of `pipelines.train`'s console: `epoch   3 | ... train 12,345 tok/s ...`.
_EPOCH_RATE = re.compile(r"^epoch +\d+ \|.* train ([\d,]+) tok/s", re.MULTILINE)


def trainable_parameters(model: keras.Model) -> int:
    """The trainable parameters of `model`, a weight shared by several layers (a tied
    embedding table) counted once.

    >>> layer = keras.layers.Dense(3)
    >>> layer.build((None, 4))
    >>> trainable_parameters(layer)
    15
    """
    unique = {id(weight): weight for weight in model.trainable_weights}
    return int(sum(np.prod(weight.shape) for weight in unique.values()))


def epoch_token_rates(console: str) -> list[int]:
    """The training target tokens/s of every epoch line of a `pipelines.train` console.

    >>> epoch_token_rates("epoch   1 | loss 5.1 | train 1,250 tok/s\\nepoch   2 | train 980 tok/s")
    [1250, 980]
    """
    return [int(rate.replace(",", "")) for rate in _EPOCH_RATE.findall(console)]


def median_token_rate(console: str) -> float | None:
    """The median of the epochs' training rates of a console (None: no epoch ended).

    >>> median_token_rate("epoch   1 | train 900 tok/s\\nepoch   2 | train 1,000 tok/s")
    950.0
    >>> median_token_rate("no epochs") is None
    True
    """
    rates = epoch_token_rates(console)
    return statistics.median(rates) if rates else None


def expanded_flagfile(path: str, root: str) -> str:
    """The text of flagfile `path` with each `--flagfile=FILE` line replaced by FILE's
    expanded text (a relative FILE from `root`, the directory the pipelines run in)."""
    with open(os.path.join(root, path), encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    included = (re.match(r"^--flagfile=(\S+)\s*$", line) for line in lines)
    return "".join(
        expanded_flagfile(match.group(1), root) if match else line
        for line, match in zip(lines, included)
    )


def equal_updates_budget(flagfile: str, reference_updates: int, updates: int) -> dict[str, float]:
    """The time budget that stretches a run of `flagfile` (its text) to
    `reference_updates` updates at the rate of its equal-time run (`updates` in its
    `--max_train_minutes`), its `--anneal_final_minutes` stretched alike.

    >>> equal_updates_budget("--max_train_minutes=58\\n--anneal_final_minutes=5\\n", 7000, 3500)
    {'max_train_minutes': 116.0, 'anneal_final_minutes': 10.0}

    Raises:
        ValueError: for a flagfile without a time budget.
    """
    scale = reference_updates / max(updates, 1)
    budget = {}
    for name in ("max_train_minutes", "anneal_final_minutes"):
        values = re.findall(rf"^--{name}=(\S+)\s*$", flagfile, re.MULTILINE)
        if values and float(values[-1]):
            budget[name] = round(float(values[-1]) * scale, 1)
    if "max_train_minutes" not in budget:
        raise ValueError(
            "An equal-updates run needs a time budget (max_train_minutes) in its flagfile."
        )
    return budget


def format_arms_table(arms: Mapping[str, Mapping[str, Any]]) -> str:
    """A table with one column per arm and one row per figure (`flagfile` and lists,
    such as each timing round's figures, left out).

    Args:
        arms: {arm name: {figure: value}}, every arm with the first arm's figures.

    >>> print(format_arms_table({"a": {"bleu": 30.5, "updates": 1200}, "b": {"bleu": 31.0,
    ...     "updates": 900}}))
                          a               b
    bleu               30.5            31.0
    updates           1,200             900
    """
    names = list(arms)
    first = arms[names[0]]
    keys = [key for key in first if key != "flagfile" and not isinstance(first[key], list)]
    width = max(len(key) for key in keys)
    lines = [f"{'':{width}}  " + "  ".join(f"{name:>14}" for name in names)]
    for key in keys:
        cells = [_cell(arms[name][key]) for name in names]
        lines.append(f"{key:{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:>14,}"
    return f"{value!s:>14}"
