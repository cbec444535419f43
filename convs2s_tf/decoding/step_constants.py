"""What every step of one beam search reads and no step changes."""

import dataclasses

import tensorflow as tf

from convs2s_tf.vocabulary import EOS_ID, PAD_ID, UNK_ID

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
    def per_row(self):
        """Candidates taken from each hypothesis: `2 k`, as many as any step can use."""
        return min(2 * self.beam_size, self.vocab_size)

    @property
    def num_candidates(self):
        """Candidates ranked per sentence: `2 k`, so that `k` continue even when up to
        `k` of them end in `</s>`."""
        return min(2 * self.beam_size, self.beam_size * self.per_row)

    @property
    def drop_finished(self):
        """Whether sentences leave the batch once done (a compiled step keeps them)."""
        return not self.xla

    def special_bias(self, allow_eos):
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
