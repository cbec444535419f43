"""Evaluation: BLEU and chrF with sacrebleu."""

from convs2s_tf.evaluation.bleu import corpus_scores

__all__ = ["corpus_scores"]
