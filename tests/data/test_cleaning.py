"""Cleaning rules and their per-rule counts (convs2s_tf.data.cleaning)."""

import pytest

from convs2s_tf.data.cleaning import (
    EMPTY,
    LENGTH_RATIO,
    TOO_MANY_WORDS,
    CleaningConfig,
    CleaningReport,
    clean_pairs,
    normalize_pairs,
    normalize_whitespace,
)


def words(count, word="w"):
    return " ".join([word] * count)


def test_paper_defaults():
    config = CleaningConfig()
    assert (config.max_words, config.max_length_ratio) == (175, 1.5)


def test_each_rule_drops_and_counts_its_pairs():
    pairs = [
        ("A dog runs .", "Ein Hund rennt ."),  # kept
        ("", "Ein Hund ."),  # empty source
        ("A cat .", "   "),  # empty target (whitespace only)
        (words(176), words(176)),  # too many words on both sides
        (words(175), words(175)),  # exactly at the limit: kept
        (words(100), words(176)),  # too many words on the target (ratio broken too)
        (words(2), words(4)),  # ratio 2.0
        (words(4), words(6)),  # ratio exactly 1.5: kept
        (words(7), words(4)),  # ratio 1.75 the other way
    ]
    report = CleaningReport()
    kept = list(clean_pairs(pairs, CleaningConfig(), report))
    assert kept == [pairs[0], pairs[4], pairs[7]]
    assert report.pairs_read == 9
    assert report.pairs_kept == 3
    # A pair is counted under the first rule it breaks (empty, words, ratio).
    assert dict(report.dropped) == {EMPTY: 2, TOO_MANY_WORDS: 2, LENGTH_RATIO: 2}
    assert report.as_dict() == {
        "pairs_read": 9,
        "pairs_kept": 3,
        "pairs_dropped": 6,
        "dropped_by_rule": {EMPTY: 2, TOO_MANY_WORDS: 2, LENGTH_RATIO: 2},
    }


def test_zero_disables_word_and_ratio_rules_but_not_empty():
    pairs = [(words(500), words(10)), ("", "x")]
    report = CleaningReport()
    kept = list(clean_pairs(pairs, CleaningConfig(max_words=0, max_length_ratio=0), report))
    assert kept == [pairs[0]]
    assert dict(report.dropped) == {EMPTY: 1}


def test_whitespace_is_normalised_and_counts_words_not_characters():
    assert normalize_whitespace("  Ein\tHund\u2028 rennt \u00a0. ") == "Ein Hund rennt ."
    report = CleaningReport()
    kept = list(clean_pairs([("A  dog\t runs", "Ein Hund  rennt ")], CleaningConfig(), report))
    assert kept == [("A dog runs", "Ein Hund rennt")]


def test_evaluation_pairs_are_normalised_and_never_dropped():
    pairs = [("", "x"), (words(300), "y"), (" a  b ", "c")]
    report = CleaningReport()
    assert list(normalize_pairs(pairs, report)) == [("", "x"), (words(300), "y"), ("a b", "c")]
    assert (report.pairs_read, report.pairs_kept, sum(report.dropped.values())) == (3, 3, 0)


@pytest.mark.parametrize("kwargs", [{"max_words": -1}, {"max_length_ratio": 0.5}])
def test_invalid_thresholds_are_rejected(kwargs):
    with pytest.raises(ValueError):
        CleaningConfig(**kwargs)
