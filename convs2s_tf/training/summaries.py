"""TensorBoard logging: scalars, histograms, translations, attention images, hparams."""

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api


class SummaryLogger:
    """Writes TensorBoard events under `model_dir/<split>` (e.g. `train`, `valid`).

    Args:
        model_dir: The run directory.
        enabled: False on non-chief workers: every call is then a no-op.
    """

    def __init__(self, model_dir: str, enabled: bool = True) -> None:
        self.model_dir = model_dir
        self.enabled = enabled
        self._writers: dict[str, tf.summary.SummaryWriter] = {}

    def writer(self, split: str) -> tf.summary.SummaryWriter:
        if split not in self._writers:
            self._writers[split] = tf.summary.create_file_writer(
                os.path.join(self.model_dir, split)
            )
        return self._writers[split]

    def scalars(self, split: str, step: int | tf.Tensor, values: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        with self.writer(split).as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(name, value)

    def histograms(self, split: str, step: int | tf.Tensor, variables: Iterable[Any]) -> None:
        if not self.enabled:
            return
        with self.writer(split).as_default(step=step):
            for variable in variables:
                tf.summary.histogram("weights/" + variable.path, variable.value)

    def translations(
        self,
        split: str,
        step: int | tf.Tensor,
        sources: Iterable[str],
        hypotheses: Iterable[str],
        references: Iterable[str],
        count: int,
    ) -> None:
        if not self.enabled or not count:
            return
        rows = ["| source | translation | reference |", "| --- | --- | --- |"]
        for source, hypothesis, reference in list(zip(sources, hypotheses, references))[:count]:
            cells = [text.replace("|", "\\|") for text in (source, hypothesis, reference)]
            rows.append("| " + " | ".join(cells) + " |")
        with self.writer(split).as_default(step=step):
            tf.summary.text("translations", "\n".join(rows))

    def attention_image(
        self,
        split: str,
        step: int | tf.Tensor,
        tag: str,
        weights: np.ndarray | Sequence[Sequence[float]],
        source_pieces: Sequence[str],
        target_pieces: Sequence[str],
    ) -> None:
        if not self.enabled:
            return
        # Imported here: matplotlib is a quarter of a second of a run's start-up, and only
        # a run that draws attention needs it.
        from convs2s_tf.visualization import attention_heatmap_png

        png = attention_heatmap_png(weights, source_pieces, target_pieces)
        image = tf.image.decode_png(png, channels=4)[None]
        with self.writer(split).as_default(step=step):
            tf.summary.image(tag, image)

    def hparams(self, values: Mapping[str, Any] | None) -> None:
        if not self.enabled or not values:
            return
        clean = {
            key: value if isinstance(value, (bool, int, float, str)) else str(value)
            for key, value in values.items()
        }
        with self.writer("train").as_default():
            hparams_api.hparams(clean)

    def flush(self) -> None:
        for writer in self._writers.values():
            writer.flush()
