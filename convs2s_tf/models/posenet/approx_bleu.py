"""tensor2tensor's "approx BLEU": teacher-forced argmax on subword ids, per batch.

Papers built on tensor2tensor 1.x (SliceNet, PoseNet) report the `approx_bleu_score`
eval metric next to real BLEU. It is not a translation score: the decoder reads the
reference as its input (teacher forcing), each position's prediction is the argmax of
its logits, n-grams are counted on piece ids (no detokenisation), the padded rows are
compared as they are (padding counts as tokens, so the brevity penalty is always 1), an
n-gram order without a match is left out of the geometric mean instead of zeroing it,
and the figure is the mean of the per-batch scores. `approx_bleu` reproduces it on this
toolkit's evaluation batches so that the gap to real BLEU can be measured; it also
gives the same counting without the padding, over the whole split.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Iterable, Sequence

import numpy as np
import tensorflow as tf


def ngram_bleu(
    references: Sequence[Sequence[int]],
    translations: Sequence[Sequence[int]],
    max_order: int = 4,
) -> float:
    """BLEU of `translations` against one reference each, counted as tensor2tensor's
    `compute_bleu` counts: clipped n-gram matches summed over the corpus, orders with no
    match left out of the geometric mean (divided by `max_order` all the same), and the
    brevity penalty of the total lengths. Returns a fraction (0-1)."""
    matches = [0] * max_order
    possible = [0] * max_order
    reference_length = translation_length = 0
    for reference, translation in zip(references, translations):
        reference_length += len(reference)
        translation_length += len(translation)
        reference_counts = _ngrams(reference, max_order)
        translation_counts = _ngrams(translation, max_order)
        for ngram, count in reference_counts.items():
            matches[len(ngram) - 1] += min(count, translation_counts[ngram])
        for ngram, count in translation_counts.items():
            possible[len(ngram) - 1] += count
    precisions = [m / p if p else 0.0 for m, p in zip(matches, possible)]
    if max(precisions) == 0:
        return 0.0
    geometric_mean = math.exp(sum(math.log(p) for p in precisions if p) / max_order)
    ratio = translation_length / reference_length if reference_length else 1.0
    brevity = math.exp(1.0 - 1.0 / ratio) if 0 < ratio < 1.0 else 1.0
    return geometric_mean * brevity


def _ngrams(segment: Sequence[int], max_order: int) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for order in range(1, max_order + 1):
        for start in range(len(segment) - order + 1):
            counts[tuple(segment[start : start + order])] += 1
    return counts


@dataclasses.dataclass(frozen=True)
class ApproxBleu:
    """tensor2tensor-style scores of a split, in BLEU points (0-100).

    Attributes:
        per_batch: the mean over batches of each batch's score on its padded rows
            (tensor2tensor's `approx_bleu_score`).
        unpadded: the same counting over the whole split, each row cut at its
            reference's end (no padding n-grams; teacher forcing makes every
            prediction as long as its reference, so there is still no brevity penalty).
        batches: batches scored.
        sentences: sentences scored.
    """

    per_batch: float
    unpadded: float
    batches: int
    sentences: int


def approx_bleu(model: tf.keras.Model, batches: Iterable[dict], pad_id: int) -> ApproxBleu:
    """Scores `model` teacher-forced on evaluation `batches` ("source", "target_input"
    and "target", as `make_shard_eval_dataset` gives them)."""

    @tf.function(reduce_retracing=True, autograph=False)
    def predict(source: tf.Tensor, target_input: tf.Tensor) -> tf.Tensor:
        logits = model({"source": source, "target_input": target_input}, training=False)
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    per_batch, references, translations = [], [], []
    for batch in batches:
        predictions = predict(batch["source"], batch["target_input"]).numpy()
        targets = batch["target"].numpy()
        per_batch.append(ngram_bleu(targets.tolist(), predictions.tolist()))
        lengths = (targets != pad_id).sum(axis=1)
        for target, prediction, length in zip(targets, predictions, lengths):
            references.append(target[:length].tolist())
            translations.append(prediction[:length].tolist())
    if not per_batch:
        raise ValueError("approx_bleu: no batches to score.")
    return ApproxBleu(
        per_batch=100.0 * float(np.mean(per_batch)),
        unpadded=100.0 * ngram_bleu(references, translations),
        batches=len(per_batch),
        sentences=len(references),
    )
