"""Generation: incremental beam and greedy search, and the translator interface."""

from convs2s_tf.decoding.beam_search import (
    MIN_LENGTH_ERROR,
    XLA_SOURCE_MULTIPLE,
    SearchOutput,
    beam_search,
    best_hypothesis_function,
    max_output_lengths,
    top_k_with_special_bias,
)
from convs2s_tf.decoding.ensemble import Ensemble, combine_log_probs
from convs2s_tf.decoding.inference_model import (
    InferenceDecoder,
    InferenceModel,
    make_inference_model,
)
from convs2s_tf.decoding.search_config import SearchConfig
from convs2s_tf.decoding.search_parts import search_in_parts

__all__ = [
    "Ensemble",
    "InferenceDecoder",
    "InferenceModel",
    "MIN_LENGTH_ERROR",
    "SearchConfig",
    "SearchOutput",
    "XLA_SOURCE_MULTIPLE",
    "beam_search",
    "best_hypothesis_function",
    "combine_log_probs",
    "make_inference_model",
    "max_output_lengths",
    "search_in_parts",
    "top_k_with_special_bias",
]
