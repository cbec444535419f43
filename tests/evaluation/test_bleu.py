import pytest

from convs2s_tf.evaluation.bleu import corpus_scores

REFERENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."]


def test_cased_bleu_counts_case_and_lowercase_bleu_does_not():
    hypotheses = ["ein mann fährt fahrrad.", "zwei hunde spielen im schnee."]
    scores = corpus_scores(hypotheses, REFERENCES)
    assert scores["bleu"] < 50.0
    assert scores["bleu_lowercase_intl"] == pytest.approx(100.0)
    assert "case:lc" in scores["bleu_lowercase_intl_signature"]
    assert "tok:intl" in scores["bleu_lowercase_intl_signature"]
    assert "case:mixed" in scores["bleu_signature"]
    assert "tok:13a" in scores["bleu_signature"]


def test_identical_text_scores_full_marks():
    scores = corpus_scores(REFERENCES, REFERENCES)
    assert scores["bleu"] == pytest.approx(100.0)
    assert scores["chrf"] == pytest.approx(100.0)


def test_unpaired_lines_are_refused():
    with pytest.raises(ValueError, match="1 hypotheses but 2 references"):
        corpus_scores(REFERENCES[:1], REFERENCES)
