"""Tests of decoder states that grow with the steps taken: every route of the search
(graph mode a column a step, a compiled step in phases, a compiled loop at its history's
width) finds what a search recomputing every prefix finds."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.recompute_search import recompute_beam_search
from helpers.search_models import tiny_model, tiny_posenet

from convs2s_tf.decoding import SearchConfig, beam_search
from convs2s_tf.decoding.compiled_search import (
    BucketedSearch,
    SearchBuckets,
    pad_rows_and_positions,
)
from convs2s_tf.decoding.growing_state import (
    grow_state,
    grows,
    outgrows,
    phase_width,
    phase_widths,
)
from convs2s_tf.models.limited_axis import LimitedAxis
from convs2s_tf.vocabulary import PAD_ID

# At least 18 tokens: every search crosses the first phase (16 positions).
CONFIG = SearchConfig(beam_size=3, nbest=3, max_len_a=0, max_len_b=22, min_length=18)
SOURCE = tf.constant([[5, 6, 7, 8, 2], [9, 10, 2, PAD_ID, PAD_ID], [4, 2, PAD_ID, PAD_ID, PAD_ID]])


@pytest.fixture(scope="module")
def posenet():
    return tiny_posenet(seed=5)


@pytest.fixture(scope="module")
def reference(posenet):
    """The search that recomputes every prefix with the parallel pass (no state)."""
    return tf.function(lambda source: recompute_beam_search(posenet, source, CONFIG))(SOURCE)


def _assert_same_search(output, reference):
    np.testing.assert_array_equal(output.tokens.numpy(), reference.tokens.numpy())
    np.testing.assert_array_equal(output.lengths.numpy(), reference.lengths.numpy())
    np.testing.assert_allclose(output.scores.numpy(), reference.scores.numpy(), atol=1e-5)


@pytest.mark.parametrize("xla", [False, True], ids=["graph", "compiled_step"])
def test_a_growing_state_searches_as_recomputing_every_prefix(posenet, reference, xla):
    search = tf.function(lambda source: beam_search(posenet, source, CONFIG.replace(xla=xla)))
    output = search(SOURCE)
    assert output.lengths.numpy().min() >= 19
    _assert_same_search(output, reference)


@pytest.mark.parametrize(
    "source_length, compiled_steps",
    [(32, 23), (8, 16)],
    ids=["compiled_throughout", "on_in_graph_mode"],
)
def test_a_compiled_loop_searches_a_growing_state_at_its_buckets_source_width(
    posenet, reference, source_length, compiled_steps
):
    # The state holds the bucket's source width (at least 16 positions); a search of
    # more steps (here 19 to 23) goes on in graph mode from the compiled loop's state.
    buckets = SearchBuckets(batch_sizes=(4,), source_length=source_length)
    search = BucketedSearch(posenet, CONFIG, buckets)
    assert search.state_width == min(32, max(16, source_length))
    output = tf.function(lambda source: search(source, nbest=3))(SOURCE)
    _assert_same_search(output, reference)
    assert search.compiled_loop.experimental_get_tracing_count() == 1
    encoder_output = search.encode(SOURCE)[0]
    padded = tf.nest.map_structure(
        lambda t, axis: pad_rows_and_positions(t, 4, source_length, axis),
        encoder_output,
        posenet.source_axes(encoder_output),
    )
    lengths = tf.constant([22, 22, 22, 0])
    state = search.compiled_loop(padded, lengths, tf.range(4) < 3, None)
    assert int(state.step) == compiled_steps


def test_state_grows_only_on_its_position_axes(posenet):
    decoder = posenet.decoder
    state = decoder.initial_state(6)
    assert grows(decoder, state) and not grows(
        tiny_model().decoder, tiny_model().decoder.initial_state(6)
    )
    axes = tf.nest.flatten(decoder.position_axes(state))
    # The boxes' windows keep their convolutions' spans (3, 7, 15 and 31 inputs).
    assert sorted({axis.length for axis in axes if isinstance(axis, LimitedAxis)}) == [3, 7, 15, 31]
    assert outgrows(decoder, state, 64) and not outgrows(
        tiny_model().decoder, tiny_model().decoder.initial_state(6), 64
    )
    for width in (5, 20):
        grown = grow_state(decoder, state, width)
        for before, after, axis in zip(tf.nest.flatten(state), tf.nest.flatten(grown), axes):
            expected = before.shape.as_list()
            if isinstance(axis, LimitedAxis):
                expected[axis.axis] = min(width, axis.length)
            elif axis is not None:
                expected[axis] = width
            assert after.shape.as_list() == expected
            assert not np.any(after.numpy())


def test_phase_widths_double_up_to_the_history():
    assert phase_widths(208) == (16, 32, 64, 128, 208)
    assert phase_widths(40) == (16, 32, 40)
    widths = [int(phase_width(tf.constant(step), 48, 1024)) for step in (0, 15, 16, 31, 32, 47)]
    assert widths == [16, 16, 32, 32, 48, 48]
