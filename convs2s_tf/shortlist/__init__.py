"""Vocabulary selection (paper section 5.4): decoding against a per-batch shortlist of
target pieces learnt from the training pairs."""

from convs2s_tf.shortlist.alignment import TranslationTable, fit_ibm1
from convs2s_tf.shortlist.building import (
    build_shortlist,
    pair_encoder,
    shortlist_path,
)
from convs2s_tf.shortlist.shortlist import (
    SHORTLIST_FILE,
    Shortlist,
    ShortlistError,
    ShortlistTable,
)

__all__ = [
    "SHORTLIST_FILE",
    "Shortlist",
    "ShortlistError",
    "ShortlistTable",
    "TranslationTable",
    "build_shortlist",
    "fit_ibm1",
    "pair_encoder",
    "shortlist_path",
]
