"""Tests of `Ensemble`: the search over several models combines them as fairseq does."""

import math

import numpy as np
import pytest
import tensorflow as tf
from helpers.search_models import tiny_model

from convs2s_tf.decoding import Ensemble, SearchConfig, beam_search, combine_log_probs
from convs2s_tf.vocabulary import EOS_ID

SOURCE = tf.constant([[5, 6, 7, 2], [1, 1, 8, 2], [9, 4, 3, 2]])
SEARCH = SearchConfig(beam_size=4, max_len_b=6, nbest=3)


def _assert_same_search(expected, actual, score_tolerance):
    np.testing.assert_array_equal(expected.tokens.numpy(), actual.tokens.numpy())
    np.testing.assert_array_equal(expected.lengths.numpy(), actual.lengths.numpy())
    np.testing.assert_allclose(expected.scores.numpy(), actual.scores.numpy(), atol=score_tolerance)


def test_combine_log_probs_is_the_log_of_the_mean_probability():
    rng = np.random.default_rng(0)
    logits = [tf.constant(rng.normal(size=(3, 7)), tf.float32) for _ in range(3)]
    probabilities = np.mean([tf.nn.softmax(row).numpy() for row in logits], axis=0)
    combined = combine_log_probs(logits).numpy()
    np.testing.assert_allclose(combined, np.log(probabilities), atol=1e-6)
    # A single member's logits are passed through untouched.
    assert combine_log_probs(logits[:1]) is logits[0]


@pytest.mark.parametrize("xla", [False, True])
def test_single_member_ensemble_searches_bit_for_bit_as_its_model(xla):
    model = tiny_model(target_vocab_size=12)
    expected = beam_search(model, SOURCE, SEARCH.replace(xla=xla), return_attention=True)
    actual = beam_search(Ensemble([model]), SOURCE, SEARCH.replace(xla=xla), return_attention=True)
    _assert_same_search(expected, actual, score_tolerance=0.0)
    np.testing.assert_array_equal(expected.attention.numpy(), actual.attention.numpy())


def test_ensemble_of_a_model_with_itself_gives_its_outputs():
    model = tiny_model(target_vocab_size=12)
    expected = beam_search(model, SOURCE, SEARCH, return_attention=True)
    actual = beam_search(Ensemble([model, model]), SOURCE, SEARCH, return_attention=True)
    _assert_same_search(expected, actual, score_tolerance=1e-5)
    np.testing.assert_allclose(expected.attention.numpy(), actual.attention.numpy(), atol=1e-6)


def _member_log_probs(model, source_row, target):
    """`[len(target)]` log-probabilities of `target` (ending in </s>) by a parallel pass."""
    decoder_input = [EOS_ID] + list(target[:-1])
    logits = model({"source": source_row[None], "target_input": tf.constant([decoder_input])})
    log_probs = tf.nn.log_softmax(logits[0]).numpy()
    return np.array([log_probs[i, token] for i, token in enumerate(target)], np.float64)


@pytest.mark.parametrize("length_penalty", [1.0, 0.5])
def test_two_member_scores_follow_the_formula(length_penalty):
    members = [tiny_model(target_vocab_size=12, seed=3), tiny_model(target_vocab_size=12, seed=8)]
    output = beam_search(Ensemble(members), SOURCE, SEARCH.replace(length_penalty=length_penalty))
    for row in range(SOURCE.shape[0]):
        for rank in range(SEARCH.nbest):
            length = int(output.lengths[row, rank])
            target = output.tokens[row, rank, :length].numpy().tolist()
            per_member = np.stack([_member_log_probs(m, SOURCE[row], target) for m in members])
            # log-mean-exp over members, token by token, summed and length-normalised.
            combined = np.logaddexp.reduce(per_member, axis=0) - math.log(len(members))
            expected = combined.sum() / length**length_penalty
            assert float(output.scores[row, rank]) == pytest.approx(expected, abs=1e-4)
    # The ensemble is not simply one of its members.
    alone = [beam_search(m, SOURCE, SEARCH).scores.numpy() for m in members]
    assert not any(np.allclose(scores, output.scores.numpy(), atol=1e-4) for scores in alone)


@pytest.mark.parametrize("xla", [False, True])
def test_results_do_not_depend_on_batch_mates(xla):
    ensemble = Ensemble([tiny_model(target_vocab_size=12, seed=s) for s in (3, 8, 13)])
    together = beam_search(ensemble, SOURCE, SEARCH.replace(xla=xla))
    for row in range(SOURCE.shape[0]):
        source = SOURCE[row : row + 1]
        # Alone, a sentence has no padding columns a batch-mate forced on it.
        source = tf.boolean_mask(source, source[0] != 1, axis=1)
        alone = beam_search(ensemble, source, SEARCH.replace(xla=xla))
        lengths = together.lengths[row].numpy()
        np.testing.assert_array_equal(lengths, alone.lengths[0].numpy())
        for rank, length in enumerate(lengths):
            np.testing.assert_array_equal(
                together.tokens[row, rank, :length].numpy(), alone.tokens[0, rank, :length]
            )
        np.testing.assert_allclose(together.scores[row], alone.scores[0], atol=1e-5)


def test_members_of_other_vocabulary_sizes_are_refused():
    with pytest.raises(ValueError, match="member 1 has .* vocabulary sizes"):
        Ensemble([tiny_model(target_vocab_size=12), tiny_model(target_vocab_size=13)])
    with pytest.raises(ValueError, match="at least one model"):
        Ensemble([])


def test_ensemble_holds_every_members_variables_and_positions():
    short = tiny_model(target_vocab_size=12, max_target_positions=20, max_source_positions=30)
    ensemble = Ensemble([tiny_model(target_vocab_size=12), short])
    assert len(ensemble.variables) == sum(len(m.variables) for m in ensemble.members)
    assert ensemble.decoder.max_length == short.decoder.max_length
    assert ensemble.encoder.max_length == short.encoder.max_length
    assert ensemble.decoder.vocab_size == 12
