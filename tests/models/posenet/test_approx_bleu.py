"""tensor2tensor's approx BLEU: its n-gram counting, checked against sacrebleu where the
two agree and on the cases where tensor2tensor's differs."""

import numpy as np
import pytest
import sacrebleu

from convs2s_tf.models.posenet.approx_bleu import approx_bleu, ngram_bleu


def _sacrebleu(references, translations):
    join = lambda rows: [" ".join(map(str, row)) for row in rows]  # noqa: E731
    return sacrebleu.corpus_bleu(
        join(translations), [join(references)], tokenize="none", smooth_method="none"
    ).score


def test_equals_sacrebleu_when_every_order_matches(rng):
    references = [list(rng.integers(4, 12, size=rng.integers(5, 12))) for _ in range(30)]
    translations = [
        [token if rng.random() < 0.7 else 13 for token in row[: len(row) - rng.integers(0, 2)]]
        for row in references
    ]
    assert ngram_bleu(references, translations) * 100 == pytest.approx(
        _sacrebleu(references, translations), abs=1e-6
    )


def test_an_order_without_a_match_is_left_out_not_zero():
    # Unigrams 3/4, bigrams 1/3, no trigram or 4-gram: sacrebleu gives 0, tensor2tensor
    # exp((log 3/4 + log 1/3) / 4).
    references, translations = [[5, 6, 7, 8]], [[5, 6, 9, 8]]
    assert _sacrebleu(references, translations) == 0
    expected = np.exp((np.log(3 / 4) + np.log(1 / 3)) / 4)
    assert ngram_bleu(references, translations) == pytest.approx(expected)
    assert ngram_bleu([[5, 6]], [[7, 8]]) == 0.0


def test_padding_counts_as_tokens_in_the_per_batch_score():
    """A model that predicts padding everywhere: nothing matches without the padding,
    most of the padded rows match with it."""
    import tensorflow as tf

    pad = 1

    class PadEverywhere(tf.keras.Model):
        def call(self, inputs, training=False):
            target_input = inputs["target_input"]
            return tf.one_hot(tf.fill(tf.shape(target_input), pad), 10)

    target = np.array([[5, 6, 2, 1, 1, 1, 1, 1], [7, 2, 1, 1, 1, 1, 1, 1]], np.int32)
    batch = {
        "source": tf.constant([[5, 2], [6, 2]]),
        "target_input": tf.constant(np.roll(target, 1, axis=1)),
        "target": tf.constant(target),
    }
    scores = approx_bleu(PadEverywhere(), [batch], pad_id=pad)
    assert scores.unpadded == 0.0 and scores.sentences == 2 and scores.batches == 1
    assert scores.per_batch == pytest.approx(100 * ngram_bleu(target.tolist(), [[pad] * 8] * 2))
    assert scores.per_batch > 50
