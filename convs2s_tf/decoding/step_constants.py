"""What every step of one beam search reads and no step changes."""

from __future__ import annotations

import collections
import dataclasses
from typing import TYPE_CHECKING

import tensorflow as tf

from convs2s_tf.vocabulary import EOS_ID, PAD_ID, UNK_ID

if TYPE_CHECKING:
    from convs2s_tf.decoding.decoder_protocol import ShortlistDecoder
    from convs2s_tf.shortlist.shortlist import ShortlistTable

NEG_INF = float("-inf")


@dataclasses.dataclass(frozen=True)
class StepConstants:
    """The constants of one search, as its step functions read them.

    Attributes:
        beam_size: Beam width `k`: hypotheses kept per sentence.
        vocab_size: Target vocabulary size.
        min_length: Minimum number of tokens before `</s>`.
        length_penalty: `alpha` in `score / length ** alpha`.
        unk_penalty: Subtracted from the log-probability of `<unk>`.
        return_attention: Whether each hypothesis' attention is kept.
        xla: Whether the step is one XLA computation; its shapes then stay
            fixed, so finished sentences stay in the batch.
    """

    beam_size: int
    vocab_size: int
    min_length: int = 1
    length_penalty: float = 1.0
    unk_penalty: float = 0.0
    return_attention: bool = False
    xla: bool = False

    @property
    def per_row(self) -> int:
        """Candidates taken from each hypothesis: `2 k`, as many as any step can use."""
        return min(2 * self.beam_size, self.vocab_size)

    @property
    def num_candidates(self) -> int:
        """Candidates ranked per sentence: `2 k`, so that `k` continue even when up to
        `k` of them end in `</s>`."""
        return min(2 * self.beam_size, self.beam_size * self.per_row)

    @property
    def drop_finished(self) -> bool:
        """Whether sentences leave the batch once done (a compiled step keeps them)."""
        return not self.xla

    def special_bias(self, allow_eos: bool) -> tf.Tensor:
        """The fixed adjustments of the special tokens' logits (ids `0..3`).

        Args:
            allow_eos: False before `min_length` tokens, where `</s>` is forbidden.

        Returns:
            `[4]` float32: -inf for `<pad>` (and `</s>` when not allowed), `-unk_penalty`
            for `<unk>`, 0 for the others.
        """
        ids = tf.range(max(PAD_ID, UNK_ID, EOS_ID) + 1)
        bias = tf.where(
            tf.equal(ids, PAD_ID),
            NEG_INF,
            tf.where(tf.equal(ids, UNK_ID), -float(self.unk_penalty), 0.0),
        )
        return bias if allow_eos else tf.where(tf.equal(ids, EOS_ID), NEG_INF, bias)


OutputVocabulary = collections.namedtuple("OutputVocabulary", ["ids", "subset"])
OutputVocabulary.__doc__ = """The target ids a search decodes against (a shortlist's set).

Fields:
    ids: `[columns]` int32 token id of each logit column (ids 0..3 in columns 0..3).
    subset: The decoder's projection of those columns (`select_outputs`), computed once
        per search.
"""


def output_vocabulary(
    decoder: ShortlistDecoder,
    shortlist: ShortlistTable | None,
    source: tf.Tensor,
    constants: StepConstants,
    capacity: int | None = None,
    multiple: int | None = None,
) -> OutputVocabulary | None:
    """The `OutputVocabulary` of a batch under `shortlist` (a `ShortlistTable`), or None.

    Args:
        decoder: The model's decoder (or an ensemble's).
        shortlist: A `ShortlistTable`, or None for the whole vocabulary.
        source: `[batch, source]` int32 source ids.
        constants: The search's `StepConstants` (the set holds at least `per_row` ids).
        capacity: A fixed number of columns (compiled searches), or None.
        multiple: Round the number of columns up to a multiple of this (fewer distinct
            shapes for a compiled step), or None.
    """
    if shortlist is None:
        return None
    ids, valid = shortlist.output_vocabulary(
        source, min_size=constants.per_row, capacity=capacity, multiple=multiple
    )
    return OutputVocabulary(ids=ids, subset=decoder.select_outputs(ids, valid))
