"""TensorBoard logging: scalars, histograms, translations, attention images, hparams."""

import os

import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api

from convs2s_tf.visualization import attention_heatmap_png


class SummaryLogger:
    """Writes TensorBoard events under `model_dir/<split>` (e.g. `train`, `valid`).

    Args:
        model_dir: The run directory.
        enabled: False on non-chief workers: every call is then a no-op.
    """

    def __init__(self, model_dir, enabled=True):
        self.model_dir = model_dir
        self.enabled = enabled
        self._writers = {}

    def writer(self, split):
        if split not in self._writers:
            self._writers[split] = tf.summary.create_file_writer(
                os.path.join(self.model_dir, split)
            )
        return self._writers[split]

    def scalars(self, split, step, values):
        if not self.enabled:
            return
        with self.writer(split).as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(name, value)

    def histograms(self, split, step, variables):
        if not self.enabled:
            return
        with self.writer(split).as_default(step=step):
            for variable in variables:
                tf.summary.histogram("weights/" + variable.path, variable.value)

    def translations(self, split, step, sources, hypotheses, references, count):
        if not self.enabled or not count:
            return
        rows = ["| source | translation | reference |", "| --- | --- | --- |"]
        for source, hypothesis, reference in list(zip(sources, hypotheses, references))[:count]:
            cells = [text.replace("|", "\\|") for text in (source, hypothesis, reference)]
            rows.append("| " + " | ".join(cells) + " |")
        with self.writer(split).as_default(step=step):
            tf.summary.text("translations", "\n".join(rows))

    def attention_image(self, split, step, tag, weights, source_pieces, target_pieces):
        if not self.enabled:
            return
        png = attention_heatmap_png(weights, source_pieces, target_pieces)
        image = tf.image.decode_png(png, channels=4)[None]
        with self.writer(split).as_default(step=step):
            tf.summary.image(tag, image)

    def hparams(self, values):
        if not self.enabled or not values:
            return
        clean = {
            key: value if isinstance(value, (bool, int, float, str)) else str(value)
            for key, value in values.items()
        }
        with self.writer("train").as_default():
            hparams_api.hparams(clean)

    def flush(self):
        for writer in self._writers.values():
            writer.flush()
