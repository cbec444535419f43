"""Tests of the constants a search's steps read."""

import dataclasses

import numpy as np
import pytest

from convs2s_tf.decoding.step_constants import StepConstants

NEG_INF = float("-inf")


@pytest.mark.parametrize(
    "beam_size, vocab_size, per_row, num_candidates",
    [(3, 9, 6, 6), (1, 5, 2, 2), (3, 4, 4, 6), (64, 5, 5, 128), (1, 1, 1, 1)],
)
def test_candidate_counts(beam_size, vocab_size, per_row, num_candidates):
    constants = StepConstants(beam_size=beam_size, vocab_size=vocab_size)
    assert constants.per_row == per_row
    assert constants.num_candidates == num_candidates


def test_special_bias_forbids_pad_and_early_eos_and_penalises_unk():
    constants = StepConstants(beam_size=2, vocab_size=9, unk_penalty=1.5)
    # Ids <s>, <pad>, </s>, <unk>.
    np.testing.assert_array_equal(
        constants.special_bias(allow_eos=True).numpy(), [0.0, NEG_INF, 0.0, -1.5]
    )
    np.testing.assert_array_equal(
        constants.special_bias(allow_eos=False).numpy(), [0.0, NEG_INF, NEG_INF, -1.5]
    )


def test_only_a_compiled_step_keeps_finished_sentences():
    assert StepConstants(beam_size=2, vocab_size=9).drop_finished
    assert not StepConstants(beam_size=2, vocab_size=9, xla=True).drop_finished


def test_constants_are_frozen_and_hashable():
    constants = StepConstants(beam_size=2, vocab_size=9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        constants.beam_size = 3
    assert hash(constants) == hash(StepConstants(beam_size=2, vocab_size=9))
