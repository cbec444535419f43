"""The search against a shortlist: the same search as over the whole vocabulary with every
other target id made impossible, on every path (graph, compiled buckets, ensembles)."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.search_models import tiny_model

from convs2s_tf.decoding import Ensemble, SearchConfig, beam_search
from convs2s_tf.decoding.compiled_search import BucketedSearch, SearchBuckets
from convs2s_tf.layers import Int8Kernel, fold_kernels
from convs2s_tf.layers.int8_kernel import graph_mode_kernels
from convs2s_tf.shortlist import Shortlist, ShortlistTable
from convs2s_tf.vocabulary import PAD_ID

VOCAB = 30
SEARCH = SearchConfig(beam_size=3, max_len_b=7, nbest=2)
SOURCE = tf.constant([[5, 6, 7, 2], [8, 2, PAD_ID, PAD_ID], [4, 9, 10, 2]])
TOP_TARGETS = np.array(
    [[-1, -1]] * 4 + [[7, 9], [11, -1], [12, 13], [14, 7], [15, 16], [17, 18], [19, 20]],
    np.int32,
)
SHORTLIST = Shortlist(TOP_TARGETS, np.array([21, 22], np.int32), target_vocab_size=VOCAB)


@pytest.fixture(scope="module")
def model():
    return tiny_model(target_vocab_size=VOCAB, seed=5)


def _assert_same(expected, actual, atol, rtol=1e-7):
    np.testing.assert_array_equal(expected.tokens.numpy(), actual.tokens.numpy())
    np.testing.assert_array_equal(expected.lengths.numpy(), actual.lengths.numpy())
    np.testing.assert_allclose(expected.scores.numpy(), actual.scores.numpy(), atol=atol, rtol=rtol)


def _masked_model(candidate_ids):
    """The fixture's model with an output bias of -inf outside `candidate_ids`."""
    masked = tiny_model(target_vocab_size=VOCAB, seed=5)
    bias = masked.decoder.output_projection.bias
    outside = np.ones(VOCAB, bool)
    outside[candidate_ids] = False
    bias.assign(np.where(outside, -np.inf, bias.numpy()).astype(np.float32))
    return masked


def test_the_graph_set_is_the_sorted_union(model):
    table = ShortlistTable(SHORTLIST)
    ids, valid = table.output_vocabulary(SOURCE)
    assert ids.numpy().tolist() == SHORTLIST.candidate_ids(SOURCE.numpy()).tolist()
    assert valid.numpy().all()
    # A fixed capacity pads with invalid <s> columns after the set.
    capacity = table.capacity(rows=4, source_length=4)
    ids, valid = table.output_vocabulary(SOURCE, capacity=capacity)
    count = len(SHORTLIST.candidate_ids(SOURCE.numpy()))
    assert ids.shape == [capacity] and valid.numpy().sum() == count
    assert (ids.numpy()[count:] == 0).all()


@pytest.mark.parametrize("xla", [False, True])
def test_a_set_of_every_id_searches_as_the_whole_vocabulary(model, xla):
    everything = Shortlist(TOP_TARGETS, np.arange(4, VOCAB), target_vocab_size=VOCAB)
    expected = beam_search(model, SOURCE, SEARCH.replace(xla=xla))
    actual = beam_search(
        model, SOURCE, SEARCH.replace(xla=xla), shortlist=ShortlistTable(everything)
    )
    # The same hypotheses; the scores to the last bit or so (the gathered projection's
    # products may round differently on some CPUs).
    _assert_same(expected, actual, atol=0.0, rtol=1e-6)


@pytest.mark.parametrize("xla", [False, True])
def test_the_search_equals_the_whole_vocabulary_with_the_others_impossible(model, xla):
    output = beam_search(
        model, SOURCE, SEARCH.replace(xla=xla), shortlist=ShortlistTable(SHORTLIST)
    )
    candidate_ids = SHORTLIST.candidate_ids(SOURCE.numpy())
    expected = beam_search(_masked_model(candidate_ids), SOURCE, SEARCH.replace(xla=xla))
    _assert_same(expected, output, atol=1e-5)
    assert set(output.tokens.numpy().ravel()) <= set(candidate_ids)


def test_batch_mates_matter_only_through_the_set(model):
    batch = beam_search(model, SOURCE, SEARCH, shortlist=ShortlistTable(SHORTLIST))
    # The first sentence alone, decoded against the set its batch had.
    batch_set = SHORTLIST.candidate_ids(SOURCE.numpy())
    same_set = Shortlist(TOP_TARGETS, batch_set[batch_set >= 4], target_vocab_size=VOCAB)
    alone = beam_search(model, SOURCE[:1], SEARCH, shortlist=ShortlistTable(same_set))
    np.testing.assert_array_equal(
        alone.tokens.numpy()[0], batch.tokens.numpy()[0, :, : alone.tokens.shape[2]]
    )
    np.testing.assert_allclose(alone.scores.numpy()[0], batch.scores.numpy()[0], atol=1e-5)


def test_compiled_buckets_find_what_the_graph_search_finds(model):
    table = ShortlistTable(SHORTLIST)
    config = SearchConfig(beam_size=3, max_len_b=7)
    search = BucketedSearch(
        model, config, SearchBuckets(source_length=8), fold_kernels(model), shortlist=table
    )

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def run(source):
        output = search(source, nbest=2)
        return output.tokens, output.scores, output.lengths

    tokens, scores, lengths = run(SOURCE)
    expected = beam_search(model, SOURCE, SEARCH, shortlist=table)
    np.testing.assert_array_equal(expected.tokens.numpy(), tokens.numpy())
    np.testing.assert_array_equal(expected.lengths.numpy(), lengths.numpy())
    np.testing.assert_allclose(expected.scores.numpy(), scores.numpy(), atol=1e-5)


def test_int8_kernels_search_the_shortlist_alike_compiled_and_in_graph_mode(model):
    # The shortlist's columns are read in int8 too: the compiled bucket's int8 products
    # and graph mode's float32 products of the same integers agree.
    table = ShortlistTable(SHORTLIST)
    config = SearchConfig(beam_size=3, max_len_b=7, int8_weights=True)
    kernels = [Int8Kernel.quantize(kernel) for kernel in fold_kernels(model)]
    search = BucketedSearch(model, config, SearchBuckets(source_length=8), kernels, table)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def run(source):
        output = search(source, nbest=2)
        return output.tokens, output.scores, output.lengths

    tokens, scores, lengths = run(SOURCE)  # three sentences: the compiled bucket of 4
    expected = beam_search(
        model, SOURCE, config.replace(nbest=2), kernels=graph_mode_kernels(kernels), shortlist=table
    )
    np.testing.assert_array_equal(expected.tokens.numpy(), tokens.numpy())
    np.testing.assert_array_equal(expected.lengths.numpy(), lengths.numpy())
    np.testing.assert_allclose(expected.scores.numpy(), scores.numpy(), atol=1e-5)
    assert set(tokens.numpy().ravel()) <= set(SHORTLIST.candidate_ids(SOURCE.numpy()))


def test_an_ensemble_of_a_model_with_itself_keeps_the_models_shortlisted_search(model):
    table = ShortlistTable(SHORTLIST)
    expected = beam_search(model, SOURCE, SEARCH, shortlist=table)
    actual = beam_search(Ensemble([model, model]), SOURCE, SEARCH, shortlist=table)
    _assert_same(expected, actual, atol=1e-5)
