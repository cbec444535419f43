"""Attention heatmaps with source and target tokens on the axes (paper, appendix)."""

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no display: render to PNG bytes
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def attention_heatmap_png(
    weights: np.ndarray | Sequence[Sequence[float]],
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    title: str | None = None,
) -> bytes:
    """Renders `weights` (`[target, source]`) as a PNG, tokens readable on the axes.

    Args:
        weights: Attention weights, one row per target token.
        source_tokens: Labels of the columns (source pieces).
        target_tokens: Labels of the rows (generated pieces).
        title: Optional figure title.

    Returns:
        The PNG file as bytes.
    """
    weights = np.asarray(weights, dtype=np.float32)
    rows, columns = weights.shape
    if rows != len(target_tokens) or columns != len(source_tokens):
        raise ValueError(
            f"Attention of shape {weights.shape} does not match {len(target_tokens)} target and "
            f"{len(source_tokens)} source tokens."
        )
    width = min(2.0 + 0.35 * columns, 30.0)
    height = min(1.5 + 0.35 * rows, 30.0)
    figure, axes = plt.subplots(figsize=(width, height), dpi=100)
    axes.imshow(weights, cmap="Greys", vmin=0.0, vmax=max(float(weights.max()), 1e-6))
    axes.set_xticks(range(columns))
    axes.set_xticklabels(source_tokens, rotation=90, fontsize=9)
    axes.set_yticks(range(rows))
    axes.set_yticklabels(target_tokens, fontsize=9)
    axes.xaxis.tick_top()
    if title:
        axes.set_xlabel(title)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()
