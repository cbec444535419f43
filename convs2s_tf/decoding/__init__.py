"""Generation: incremental beam and greedy search, and the translator interface."""

from convs2s_tf.decoding.beam_search import (
    SearchOutput,
    beam_search,
    best_hypothesis_function,
    max_output_lengths,
)

__all__ = ["SearchOutput", "beam_search", "best_hypothesis_function", "max_output_lengths"]
