import numpy as np
import pytest

from convs2s_tf.shortlist import fit_ibm1


def _dictionary_pairs(rng, sentences=300):
    """Pairs whose target is a shuffled word-for-word translation: source id `s` always
    becomes target id `s + 10` (ids 4..13 -> 14..23)."""
    pairs = []
    for _ in range(sentences):
        source = rng.integers(4, 14, size=rng.integers(2, 7))
        pairs.append((source, rng.permutation(source + 10)))
    return pairs


def test_model1_recovers_a_word_for_word_dictionary(rng):
    table = fit_ibm1(_dictionary_pairs(rng), source_vocab_size=30, target_vocab_size=30)
    top = table.top_targets(2)
    assert top[4:14, 0].tolist() == list(range(14, 24))
    # Source ids never seen have no targets.
    assert (top[14:] == -1).all() and (top[:4] == -1).all()


def test_probabilities_are_normalised_per_source(rng):
    table = fit_ibm1(_dictionary_pairs(rng), source_vocab_size=30, target_vocab_size=30)
    totals = np.bincount(table.source_ids, weights=table.probabilities)
    seen = totals > 0
    np.testing.assert_allclose(totals[seen], 1.0, rtol=1e-9)


def test_most_frequent_counts_target_tokens():
    pairs = [([5], [7, 7, 6]), ([5, 6], [7, 8])]
    table = fit_ibm1(pairs, source_vocab_size=10, target_vocab_size=10)
    assert table.most_frequent(2).tolist() == [7, 6]
    # Only ids that occur, however many are asked for.
    assert table.most_frequent(9).tolist() == [7, 6, 8]


def test_ids_outside_the_vocabulary_are_refused():
    with pytest.raises(ValueError, match="target id is outside"):
        fit_ibm1([([5], [12])], source_vocab_size=10, target_vocab_size=10)
    with pytest.raises(ValueError, match="No sentence pair"):
        fit_ibm1([([5], [])], source_vocab_size=10, target_vocab_size=10)
