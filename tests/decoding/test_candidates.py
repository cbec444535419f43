"""Tests of a search step's candidates: the special-token rules and the two-pass top-k."""

import numpy as np
import pytest
import tensorflow as tf

from convs2s_tf.decoding.candidates import candidates, top_k_with_special_bias
from convs2s_tf.decoding.step_constants import StepConstants
from convs2s_tf.vocabulary import EOS_ID, PAD_ID, UNK_ID

NEG_INF = float("-inf")
# Ids 0..3 are <s>, <pad>, </s>, <unk>; 4..7 ordinary tokens. <pad> has the largest
# logit of every row and is never a candidate.
LOGITS = np.array(
    [
        [0.0, 9.0, 1.0, 2.0, 3.0, -1.0, 0.4, -2.0],
        [1.0, 9.0, 4.0, 0.5, -1.0, 2.0, -3.0, 1.5],
        [-1.0, 9.0, 0.0, 3.0, 1.0, -0.2, 2.5, -0.5],
        [2.0, 9.0, -1.0, 0.0, 1.0, 3.0, -2.0, 0.5],
    ],
    np.float32,
)


def log_normaliser(logits):
    logits = np.asarray(logits, np.float64)
    finite = logits[np.isfinite(logits)]
    return np.log(np.sum(np.exp(finite)))


def run_candidates(logits, step, max_lengths, **constants):
    constants = StepConstants(**dict(dict(beam_size=2, vocab_size=8), **constants))
    log_probs, ids = candidates(
        constants, tf.constant(logits), tf.constant(step), tf.constant(max_lengths)
    )
    return log_probs.numpy(), ids.numpy()


def test_candidates_are_the_best_tokens_with_unk_penalised():
    # Two sentences of k = 2 hypotheses: 4 candidates per row (2 k), pad excluded.
    log_probs, ids = run_candidates(LOGITS, step=1, max_lengths=[5, 5], unk_penalty=1.5)
    # Row 0: <unk> 2.0 - 1.5 = 0.5 ranks third; row 2: <unk> 3.0 - 1.5 = 1.5 second.
    assert ids.tolist() == [[4, 2, UNK_ID, 6], [2, 5, 7, 0], [6, UNK_ID, 4, 2], [5, 0, 4, 7]]
    for row, row_ids in enumerate(ids):
        adjusted = LOGITS[row, row_ids] - np.where(row_ids == UNK_ID, 1.5, 0.0)
        np.testing.assert_allclose(
            log_probs[row], adjusted - log_normaliser(LOGITS[row]), rtol=1e-6
        )
    assert PAD_ID not in ids


def test_eos_is_forbidden_before_min_length():
    _, ids = run_candidates(LOGITS, step=1, max_lengths=[5, 5], min_length=2)
    assert EOS_ID not in ids
    assert ids[1].tolist() == [5, 7, 0, 3]
    _, ids = run_candidates(LOGITS, step=2, max_lengths=[5, 5], min_length=2)
    assert ids[1, 0] == EOS_ID


def test_a_hypothesis_at_its_maximum_length_may_only_end():
    # The first sentence (rows 0 and 1) reached its maximum length, the second not.
    log_probs, ids = run_candidates(LOGITS, step=3, max_lengths=[3, 4])
    for row in (0, 1):
        assert ids[row, 0] == EOS_ID
        assert log_probs[row, 0] == pytest.approx(
            LOGITS[row, EOS_ID] - log_normaliser(LOGITS[row]), rel=1e-6
        )
        assert np.all(log_probs[row, 1:] == NEG_INF)
    assert ids[2].tolist() == [3, 6, 4, 2] and ids[3].tolist() == [5, 0, 4, 7]
    assert np.all(np.isfinite(log_probs[2:]))


@pytest.mark.parametrize("xla", [False, True])
def test_nan_logits_count_as_minus_infinity(xla):
    logits = LOGITS.copy()
    logits[0, 4] = np.nan  # token 4 was row 0's best
    # (A compiled step replaces NaNs at once; graph mode searches again when one shows.)
    log_probs, ids = run_candidates(logits, step=1, max_lengths=[5, 5], xla=xla)
    assert 4 not in ids[0] and ids[0, 0] == UNK_ID
    # The normaliser leaves the NaN out as exp(-inf) = 0.
    expected = logits[0, UNK_ID] - log_normaliser(np.where(np.isnan(logits[0]), NEG_INF, logits[0]))
    assert log_probs[0, 0] == pytest.approx(expected, rel=1e-6)
    assert np.all(np.isfinite(log_probs))


def test_every_token_is_a_candidate_when_the_vocabulary_is_under_two_k():
    # One sentence of k = 4 hypotheses over 5 tokens: all 5 come back, <pad> last at -inf.
    log_probs, ids = run_candidates(
        LOGITS[:, :5], step=1, max_lengths=[5], beam_size=4, vocab_size=5
    )
    assert ids[0].tolist() == [4, 3, 2, 0, PAD_ID]
    assert np.all(ids[:, -1] == PAD_ID) and np.all(log_probs[:, -1] == NEG_INF)
    assert np.all(np.isfinite(log_probs[:, :-1]))


@pytest.mark.parametrize("vocab_size", [8000, 7813, 300, 40])
@pytest.mark.parametrize("k", [1, 10])
@pytest.mark.parametrize("rounded", [False, True])
def test_two_pass_top_k_equals_full_top_k_ties_included(vocab_size, k, rounded):
    logits = tf.random.stateless_normal([33, vocab_size], seed=[vocab_size, k]) * 4.0
    if rounded:  # bfloat16 logits: many equal values, across chunks
        logits = tf.cast(tf.cast(logits, tf.bfloat16), tf.float32)
    # Rows whose best values all sit in one chunk, and a row of equal values.
    logits = tf.tensor_scatter_nd_update(logits, [[0, 5], [0, 6], [0, 7]], [50.0, 49.0, 48.0])
    logits = tf.concat([logits, tf.zeros([1, vocab_size])], axis=0)
    special_bias = tf.constant([-3.0, float("-inf"), 2.0, -1.0])
    values, ids = top_k_with_special_bias(logits, special_bias, k)
    full_bias = tf.pad(special_bias, [[0, vocab_size - 4]])
    expected_values, expected_ids = tf.math.top_k(logits + full_bias, k)
    np.testing.assert_array_equal(values.numpy(), expected_values.numpy())
    # Equal values resolve to the lowest id, as in the full top-k, whatever the chunks.
    np.testing.assert_array_equal(ids.numpy(), expected_ids.numpy())
    for chunk in (8, 20):
        _, chunked_ids = top_k_with_special_bias(logits, special_bias, k, chunk=chunk)
        np.testing.assert_array_equal(chunked_ids.numpy(), expected_ids.numpy())


def test_two_pass_top_k_refuses_a_bias_wider_than_a_chunk():
    with pytest.raises(ValueError, match="more than a chunk"):
        top_k_with_special_bias(tf.zeros([2, 40]), tf.zeros([5]), k=2, chunk=4)
