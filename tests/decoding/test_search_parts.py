"""A batch searched as several searches of its rows gives the whole batch's search."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.search_models import tiny_model

from convs2s_tf.decoding import SearchConfig, beam_search, search_in_parts

# Five sentences of different lengths: their hypotheses end at different steps, so the
# parts' outputs have different widths and must be padded to be joined.
SOURCE = tf.constant(
    [
        [5, 6, 7, 2, 1, 1, 1],
        [4, 5, 6, 7, 8, 9, 2],
        [8, 2, 1, 1, 1, 1, 1],
        [9, 10, 4, 2, 1, 1, 1],
        [6, 6, 5, 4, 7, 2, 1],
    ]
)
CONFIG = SearchConfig(beam_size=3, nbest=3, max_len_a=1.5, max_len_b=2)


def assert_same_output(actual, expected):
    for name in ("tokens", "lengths", "scores", "attention"):
        got, want = getattr(actual, name), getattr(expected, name)
        if want is None:
            assert got is None, name
            continue
        assert got.shape == want.shape, name
        # Products over fewer rows may round differently (on some CPUs, in the last bit);
        # the hypotheses found are the same.
        if name == "attention":
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, err_msg=name)
        elif name == "scores":
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)


# One sentence and two parts, or two and three: parts without rows.
@pytest.mark.parametrize("rows, parts", [(1, 2), (5, 2), (2, 3)])
def test_parts_give_the_whole_batch_search(rows, parts):
    model = tiny_model(target_vocab_size=9, seed=7)
    whole = beam_search(model, SOURCE[:rows], CONFIG.replace(parts=1), return_attention=True)

    # Traced once for every batch size, as the exports are: a batch of fewer rows than
    # parts leaves parts empty, which the graph must skip.
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
    def search(source):
        return beam_search(model, source, CONFIG.replace(parts=parts), return_attention=True)

    assert_same_output(search(SOURCE[:rows]), whole)


def test_search_in_parts_joins_the_parts_in_row_order():
    model = tiny_model(target_vocab_size=9, seed=8)
    config = CONFIG.replace(parts=1, nbest=1)
    whole = beam_search(model, SOURCE, config)
    called = []

    def search(rows):
        called.append(int(tf.shape(rows)[0]))
        return beam_search(model, rows, config)

    assert_same_output(search_in_parts(search, SOURCE, 2), whole)
    # Shared out as evenly as they go, the first part taking the odd row.
    assert called == [3, 2]


def test_parts_must_be_positive():
    with pytest.raises(ValueError, match="parts"):
        search_in_parts(lambda rows: rows, SOURCE, 0)
    with pytest.raises(ValueError, match="`parts` must be >= 1"):
        SearchConfig(parts=0).validate()
