"""Generation: incremental beam and greedy search, and the translator interface."""

from convs2s_tf.decoding.beam_search import (
    MIN_LENGTH_ERROR,
    SearchOutput,
    beam_search,
    best_hypothesis_function,
    max_output_lengths,
    search_kwargs,
)
from convs2s_tf.decoding.search_config import SearchConfig

__all__ = [
    "MIN_LENGTH_ERROR",
    "SearchConfig",
    "SearchOutput",
    "beam_search",
    "best_hypothesis_function",
    "max_output_lengths",
    "search_kwargs",
]
