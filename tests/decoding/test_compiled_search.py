"""Tests of the bucketed search: small batches in one XLA computation per bucket, the
others in graph mode, with the same results as `beam_search`."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.search_models import tiny_model

from convs2s_tf.decoding import MIN_LENGTH_ERROR, SearchConfig, beam_search
from convs2s_tf.decoding.compiled_search import (
    BucketedSearch,
    SearchBuckets,
    pad_rows_and_positions,
)
from convs2s_tf.layers import fold_kernels
from convs2s_tf.layers.int8_kernel import Int8Kernel
from convs2s_tf.vocabulary import PAD_ID

CONFIG = SearchConfig(beam_size=3, max_len_b=6)
BUCKETS = SearchBuckets(batch_sizes=(1, 2, 4), source_length=8)
# Sources of 1, 3 (padded to the bucket of 4) and 5 sentences (beyond the buckets), and
# one longer than the bucket width.
SOURCES = {
    "one": [[5, 6, 7, 2]],
    "three": [[5, 6, 7, 2], [8, 2, PAD_ID, PAD_ID], [4, 9, 10, 2]],
    "five": [[5, 6, 7, 2]] * 2 + [[8, 2, PAD_ID, PAD_ID]] * 3,
    "long": [[4, 5, 6, 7, 8, 9, 10, 4, 5, 2]],
}


@pytest.fixture(scope="module")
def model():
    return tiny_model(target_vocab_size=9, seed=21)


@pytest.fixture(scope="module")
def bucketed(model):
    """One bucketed search (compiled once per bucket for the whole module) with nbest 3."""
    return _search_function(model, nbest=3)


def _search_function(model, config=CONFIG, buckets=BUCKETS, nbest=1, kernels=None):
    kernels = fold_kernels(model) if kernels is None else kernels
    search = BucketedSearch(model, config, buckets, kernels=kernels)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def run(source):
        output = search(source, nbest=nbest)
        return output.tokens, output.scores, output.lengths

    return search, run


def test_buckets_are_validated_and_increasing():
    assert SearchBuckets().batch_sizes == (1, 2, 4, 8)
    assert SearchBuckets(batch_sizes=[1, 3]).max_batch_size == 3
    for sizes in ((), (2, 1), (0, 1), (1, 1)):
        with pytest.raises(ValueError, match="batch_sizes"):
            SearchBuckets(batch_sizes=sizes)
    with pytest.raises(ValueError, match="source_length"):
        SearchBuckets(source_length=0)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_route_finds_what_beam_search_finds(model, bucketed, name):
    source = tf.constant(SOURCES[name])
    _, run = bucketed
    tokens, scores, lengths = run(source)
    expected = beam_search(model, source, CONFIG.replace(nbest=3))
    np.testing.assert_array_equal(tokens.numpy(), expected.tokens.numpy())
    np.testing.assert_array_equal(lengths.numpy(), expected.lengths.numpy())
    np.testing.assert_allclose(scores.numpy(), expected.scores.numpy(), atol=1e-5)


def test_each_bucket_is_traced_once_whatever_the_requests(bucketed):
    search, run = bucketed
    for name in ("one", "three", "five", "long", "one", "three"):
        run(tf.constant(SOURCES[name]))
    run(tf.constant([[5, 2], [6, 2]]))
    # The signature's function once; the compiled loop once per bucket reached
    # (1, 2 and 4 sentences), never per request.
    assert run.experimental_get_tracing_count() == 1
    assert search.compiled_loop.experimental_get_tracing_count() == 3


def test_a_length_limit_a_sentence_cannot_meet_is_refused_on_the_compiled_path(model):
    config = CONFIG.replace(max_len_a=0.5, max_len_b=0, min_length=3)
    _, run = _search_function(model, config=config)
    with pytest.raises(tf.errors.InvalidArgumentError, match=MIN_LENGTH_ERROR):
        run(tf.constant([[5, 2]]))


def test_output_lengths_scale_with_the_source_in_the_compiled_path(model):
    config = CONFIG.replace(max_len_a=1.0, max_len_b=1)
    _, run = _search_function(model, config=config, nbest=3)
    source = tf.constant(SOURCES["three"])
    _, _, lengths = run(source)
    # Sources of 4, 2 and 4 tokens: at most a * length + b tokens, then </s>.
    assert np.all(lengths.numpy() <= np.array([[6], [4], [6]]))
    expected = beam_search(model, source, config.replace(nbest=3))
    np.testing.assert_array_equal(lengths.numpy(), expected.lengths.numpy())


def _int8_search(model, nbest=3):
    kernels = [Int8Kernel.quantize(kernel) for kernel in fold_kernels(model)]
    config = CONFIG.replace(int8_weights=True)
    search, run = _search_function(model, config, nbest=nbest, kernels=kernels)
    return search, run, kernels


def test_int8_kernels_give_the_same_search_compiled_and_in_graph_mode(model):
    # The compiled buckets multiply int8 by int8 (int32 sums), graph mode the same
    # integers in float32: every sentence's result is the same on either path.
    _, run, kernels = _int8_search(model)
    sentences = SOURCES["three"]
    graph_tokens, graph_scores, _ = run(tf.constant(sentences + sentences[:2]))  # 5: graph
    for index, sentence in enumerate(sentences):
        tokens, scores, _ = run(tf.constant([sentence]))  # bucket of 1: compiled
        np.testing.assert_array_equal(tokens.numpy()[0], graph_tokens.numpy()[index])
        np.testing.assert_allclose(scores.numpy()[0], graph_scores.numpy()[index], atol=1e-5)
    # And it is a search with int8-rounded weights and rows: its best scores are near,
    # not equal to, the float32 search's.
    expected = beam_search(model, tf.constant(sentences), CONFIG.replace(nbest=3))
    best, expected_best = graph_scores.numpy()[:3, 0], expected.scores.numpy()[:, 0]
    np.testing.assert_allclose(best, expected_best, atol=0.1)
    assert not np.array_equal(best, expected_best)


def test_int8_kernels_reach_an_int8_product_in_the_compiled_loop(model):
    search, run, _ = _int8_search(model)
    source = tf.constant(SOURCES["one"])
    encoder_output, max_lengths = search.encode(source)
    padded = tf.nest.map_structure(
        lambda t: pad_rows_and_positions(t, 1, BUCKETS.source_length), encoder_output
    )
    hlo = search.compiled_loop.experimental_get_compiler_ir(
        padded, max_lengths, tf.constant([True]), None
    )(stage="hlo")
    int8_dots = [line for line in hlo.splitlines() if " dot(" in line and "s8[" in line]
    # Every weight product of the step: 3 blocks' convolution, attention in and out
    # projections, the input and hidden projections, and the vocabulary.
    assert len(int8_dots) >= 3 * 3 + 2


def test_int8_weights_need_float32():
    with pytest.raises(ValueError, match="int8 weights multiply float32 rows"):
        SearchConfig(dtype="bfloat16", int8_weights=True).validate()
