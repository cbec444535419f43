"""The `Translator` interface's batching: length-sorted batches, input order restored."""

import pytest

from convs2s_tf.inference.translator import Translator, length_sorted_batches

TEXTS = ["a b c", "", "a b c d e f g", "a", "a b c d", "a b", "x y z", "a b c d e"]


class RecordingTranslator(Translator):
    """Translates a text into its upper case with score -len(text); records its batches."""

    max_nbest = 1

    def __init__(self):
        self.batches = []

    def _translate(self, texts, nbest):
        self.batches.append(list(texts))
        return [[(text.upper(), -float(len(text)))] for text in texts]


def test_length_sorted_batches_cover_every_index_once_longest_first():
    batches = length_sorted_batches(TEXTS, 3)
    assert [len(batch) for batch in batches] == [3, 3, 2]
    order = [index for batch in batches for index in batch]
    assert sorted(order) == list(range(len(TEXTS)))
    lengths = [len(TEXTS[index]) for index in order]
    assert lengths == sorted(lengths, reverse=True)
    # Equal lengths ("a b c", "x y z") keep their input order.
    assert order.index(0) < order.index(6)
    assert length_sorted_batches([], 4) == []
    with pytest.raises(ValueError, match="batch_size"):
        length_sorted_batches(TEXTS, 0)


def test_translate_all_restores_the_input_order_after_sorting():
    translator = RecordingTranslator()
    translations = translator.translate_all(TEXTS, batch_size=3)
    assert translations == [text.upper() for text in TEXTS]
    assert translator.batches == [
        [TEXTS[index] for index in batch] for batch in length_sorted_batches(TEXTS, 3)
    ]


def test_translate_all_unsorted_translates_consecutive_batches():
    translator = RecordingTranslator()
    translations = translator.translate_all(TEXTS, batch_size=3, sort_by_length=False)
    assert translations == [text.upper() for text in TEXTS]
    assert translator.batches == [TEXTS[0:3], TEXTS[3:6], TEXTS[6:8]]
    assert translator.translate_all([]) == []
