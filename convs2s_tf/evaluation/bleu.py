"""Corpus BLEU and chrF with sacrebleu's defaults and signatures."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

import sacrebleu


class CorpusScores(TypedDict):
    """What `corpus_scores` returns."""

    bleu: float
    bleu_signature: str
    bleu_text: str
    chrf: float
    chrf_signature: str
    bleu_lowercase_intl: float
    bleu_lowercase_intl_signature: str


def corpus_scores(hypotheses: Iterable[str], references: Iterable[str]) -> CorpusScores:
    """BLEU and chrF of detokenised `hypotheses` against one reference each.

    sacrebleu defaults: cased, 13a tokenisation, exponential smoothing. Also the
    lowercased BLEU with the `intl` tokeniser (`bleu_lowercase_intl`), which is closer to
    the tokenised, lowercased BLEU papers on Multi30k report; it is for comparison only.

    Returns:
        A dict with `bleu`, `chrf`, `bleu_lowercase_intl` (floats), their
        `*_signature` strings and `bleu_text`.
    """
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references; they must pair up."
        )
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    lowercase_bleu = sacrebleu.metrics.BLEU(lowercase=True, tokenize="intl")
    lowercase_score = lowercase_bleu.corpus_score(hypotheses, [references])
    return {
        "bleu": bleu_score.score,
        "bleu_signature": str(bleu.get_signature()),
        "bleu_text": str(bleu_score),
        "chrf": chrf_score.score,
        "chrf_signature": str(chrf.get_signature()),
        "bleu_lowercase_intl": lowercase_score.score,
        "bleu_lowercase_intl_signature": str(lowercase_bleu.get_signature()),
    }
