"""Tests of a search step's selection of continuing and finished hypotheses."""

import numpy as np
import pytest
import tensorflow as tf

from convs2s_tf.decoding.selection import select
from convs2s_tf.decoding.step_constants import StepConstants
from convs2s_tf.vocabulary import EOS_ID

NEG_INF = float("-inf")
EOS = EOS_ID


def run_select(log_probs, ids, alive_scores, finished_count, step, length_penalty=1.0):
    # k = 2 hypotheses per sentence, 4 candidates each (2 k), 4 ranked per sentence.
    constants = StepConstants(beam_size=2, vocab_size=9, length_penalty=length_penalty)
    selection = select(
        constants,
        tf.constant(log_probs, tf.float32),
        tf.constant(ids, tf.int32),
        tf.constant(alive_scores, tf.float32),
        tf.constant(finished_count, tf.int32),
        tf.constant(step),
    )
    return tf.nest.map_structure(lambda t: t.numpy(), selection)


def test_eos_within_the_first_k_finishes_and_the_first_k_others_continue():
    # Cumulative scores of sentence 0's ranked candidates: -1.1 (beam 0, token 5),
    # -1.2 (beam 0, </s>), -2.05 (beam 1, </s>, ranked third: not finished) and
    # -2.5 (beam 1, token 7).
    selection = run_select(
        log_probs=[[-0.1, -0.2, -3.0, -4.0], [-0.05, -0.5, -5.0, -6.0]],
        ids=[[5, EOS, 4, 6], [EOS, 7, 4, 5]],
        alive_scores=[[-1.0, -2.0]],
        finished_count=[0],
        step=2,
        length_penalty=0.5,
    )
    np.testing.assert_allclose(selection.alive_scores, [[-1.1, -2.5]], rtol=1e-6)
    assert selection.alive_beams.tolist() == [[0, 1]]
    assert selection.next_tokens.tolist() == [[5, 7]]
    assert selection.finished_count.tolist() == [1]
    assert selection.slot_filled.tolist() == [[True, False]]
    assert selection.finish_beams[0, 0] == 0
    # Normalised by length ** alpha, the length (3) counting </s>.
    assert selection.finish_scores[0, 0] == pytest.approx(-1.2 / 3**0.5, rel=1e-6)


def test_finished_slots_fill_first_come_first_served_up_to_k():
    # Sentence 1 holds one finished hypothesis; two </s> rank within the first k: the
    # first fills slot 1, the second finds no slot but still counts.
    selection = run_select(
        log_probs=[[-1.0, -1.5, -2.0, -3.0]] * 2
        + [[-0.1, -0.3, -0.4, -0.6], [0.0, -2.0, -3.0, -4.0]],
        ids=[[4, 5, 6, 7]] * 2 + [[EOS, 4, 5, 6], [EOS, 6, 4, 5]],
        alive_scores=[[-1.0, -2.0], [-0.5, -0.7]],
        finished_count=[0, 1],
        step=1,
    )
    assert selection.finished_count.tolist() == [0, 2]
    assert selection.slot_filled.tolist() == [[False, False], [False, True]]
    assert selection.finish_beams[1, 1] == 0
    assert selection.finish_scores[1, 1] == pytest.approx(-0.6 / 2, rel=1e-6)
    # The first sentence had no </s>: its best two continue.
    assert selection.alive_beams.tolist() == [[0, 0], [0, 0]]
    assert selection.next_tokens.tolist() == [[4, 5], [4, 5]]
    np.testing.assert_allclose(selection.alive_scores, [[-2.0, -2.5], [-0.8, -0.9]], rtol=1e-6)


def test_a_sentence_with_only_eos_left_keeps_no_continuing_hypothesis():
    # The first step of a sentence at its maximum length: one live beam whose only
    # candidate is </s>.
    selection = run_select(
        log_probs=[[-0.3, NEG_INF, NEG_INF, NEG_INF]] * 2,
        ids=[[EOS, 4, 5, 6]] * 2,
        alive_scores=[[0.0, NEG_INF]],
        finished_count=[0],
        step=0,
    )
    assert selection.slot_filled.tolist() == [[True, False]]
    assert selection.finish_scores[0, 0] == pytest.approx(-0.3)
    assert selection.finished_count.tolist() == [1]
    assert np.all(selection.alive_scores == NEG_INF)
