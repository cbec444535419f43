"""`Translator.translate_all`: length-sorted batches, input order restored; and its
batching, calls in flight on threads."""

import threading

import pytest

from convs2s_tf.inference.translator import Translator, length_sorted_batches, map_in_flight

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


def test_map_in_flight_keeps_the_order_and_at_most_in_flight_calls_running():
    lock = threading.Lock()
    running = [0]
    most = [0]

    def square(value):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        # Let the other thread start its call while this one runs.
        threading.Event().wait(0.01)
        with lock:
            running[0] -= 1
        return value * value

    assert list(map_in_flight(square, range(12), in_flight=2)) == [v * v for v in range(12)]
    assert 1 <= most[0] <= 2
    assert list(map_in_flight(square, [], in_flight=2)) == []
    assert list(map_in_flight(square, range(3), in_flight=1)) == [0, 1, 4]
    with pytest.raises(ValueError, match="in_flight"):
        list(map_in_flight(square, range(3), in_flight=0))


def test_map_in_flight_reraises_in_order_and_starts_nothing_after_an_error():
    started = []

    def fail_on_two(value):
        started.append(value)
        if value == 2:
            raise KeyError(value)
        return value

    results = map_in_flight(fail_on_two, range(100), in_flight=2)
    assert [next(results), next(results)] == [0, 1]
    with pytest.raises(KeyError):
        next(results)
    # Calls start only as results are taken: 2 and at most the one after it (cancelled
    # unless it had started), nothing further.
    assert {0, 1, 2} <= set(started) <= {0, 1, 2, 3}
