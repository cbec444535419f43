"""`Translator.translate_all`: length-sorted batches, input order restored."""

from convs2s_tf.inference.batching import length_sorted_batches
from convs2s_tf.inference.translator import Translator

TEXTS = ["a b c", "", "a b c d e f g", "a", "a b c d", "a b", "x y z", "a b c d e"]


class RecordingTranslator(Translator):
    """Translates a text into its upper case with score -len(text); records its batches."""

    max_nbest = 1

    def __init__(self):
        self.batches = []

    def _translate(self, texts, nbest):
        self.batches.append(list(texts))
        return [[(text.upper(), -float(len(text)))] for text in texts]


def test_translate_all_restores_the_input_order_after_sorting():
    for in_flight in (1, 2, 3):
        translator = RecordingTranslator()
        translations = translator.translate_all(TEXTS, batch_size=3, in_flight=in_flight)
        assert translations == [text.upper() for text in TEXTS]
        expected = [[TEXTS[index] for index in batch] for batch in length_sorted_batches(TEXTS, 3)]
        # Batches in flight may start in any order; each is one of the sorted batches.
        assert sorted(translator.batches) == sorted(expected)


def test_translate_all_unsorted_translates_consecutive_batches():
    translator = RecordingTranslator()
    translations = translator.translate_all(TEXTS, batch_size=3, sort_by_length=False, in_flight=1)
    assert translations == [text.upper() for text in TEXTS]
    assert translator.batches == [TEXTS[0:3], TEXTS[3:6], TEXTS[6:8]]
    assert translator.translate_all([]) == []
