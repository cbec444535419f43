"""Tests of a search step's recording, cache reordering and dropping of done sentences."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.search_models import tiny_model

from convs2s_tf.decoding.beam_state import BeamState, FinishedHypotheses, initial_beam_state
from convs2s_tf.decoding.search_step import (
    apply_selection,
    drop_finished_sentences,
    record,
    record_attention,
    record_growing,
    reorder_cache,
    search_step_function,
)
from convs2s_tf.decoding.selection import Selection
from convs2s_tf.decoding.step_constants import StepConstants
from convs2s_tf.models import EncoderOutput
from convs2s_tf.vocabulary import EOS_ID, PAD_ID

P, EOS = PAD_ID, EOS_ID


def make_selection(**fields):
    """A `Selection` of one sentence with k = 2; unnamed fields are unused zeros."""
    defaults = dict(
        alive_scores=[[-1.0, -2.0]],
        alive_beams=[[0, 0]],
        next_tokens=[[4, 4]],
        finished_count=[0],
        slot_filled=[[False, False]],
        finish_beams=[[0, 0]],
        finish_scores=[[0.0, 0.0]],
    )
    defaults.update(fields)
    return Selection(**{name: tf.constant(value) for name, value in defaults.items()})


def finished_of(tokens, scores, lengths):
    return FinishedHypotheses(tf.constant(tokens), tf.constant(scores), tf.constant(lengths))


def test_record_extends_the_chosen_histories():
    # Step 2: both continuing hypotheses extend beam 1; finished slot 1 takes beam 0.
    # Columns from the step on are rewritten (99 stands for anything left there).
    alive_tokens = tf.constant([[[4, 5, P, P, 99], [6, 7, P, P, 99]]])
    finished = finished_of([[[4, EOS, P, P, P], [P] * 5]], [[-0.3, -np.inf]], [[2, 0]])
    selection = make_selection(
        alive_beams=[[1, 1]],
        next_tokens=[[8, 9]],
        slot_filled=[[False, True]],
        finish_beams=[[0, 0]],
        finish_scores=[[0.0, -0.5]],
    )
    alive_tokens, finished = record(selection, tf.constant(2), alive_tokens, finished)
    assert alive_tokens.numpy().tolist() == [[[6, 7, 8, P, P], [6, 7, 9, P, P]]]
    assert finished.tokens.numpy().tolist() == [[[4, EOS, P, P, P], [4, 5, EOS, P, P]]]
    np.testing.assert_array_equal(finished.scores.numpy(), np.float32([[-0.3, -0.5]]))
    assert finished.lengths.numpy().tolist() == [[2, 3]]


def test_record_growing_extends_the_histories_and_writes_only_filled_sentences():
    # Step 2 of active sentences 2 and 0 of a batch of 3 (k = 2): histories 2 wide.
    # Only the first active sentence (row 2) fills a slot: slot 1, from its beam 0.
    alive_tokens = tf.constant([[[4, 5], [6, 7]], [[8, 9], [10, 11]]])
    finished = finished_of(
        [[[P] * 5] * 2, [[P] * 5] * 2, [[4, EOS, P, P, P], [P] * 5]],
        [[-np.inf] * 2, [-np.inf] * 2, [-0.3, -np.inf]],
        [[0, 0], [0, 0], [2, 0]],
    )
    selection = make_selection(
        alive_beams=[[1, 1], [0, 1]],
        next_tokens=[[8, 9], [12, 13]],
        slot_filled=[[False, True], [False, False]],
        finish_beams=[[0, 0], [1, 1]],
        finish_scores=[[0.0, -0.5], [-9.0, -9.0]],
    )
    alive_tokens, after = record_growing(
        selection, tf.constant(2), alive_tokens, finished, tf.constant([2, 0])
    )
    assert alive_tokens.numpy().tolist() == [[[6, 7, 8], [6, 7, 9]], [[8, 9, 12], [10, 11, 13]]]
    assert after.tokens.numpy()[2].tolist() == [[4, EOS, P, P, P], [4, 5, EOS, P, P]]
    np.testing.assert_array_equal(after.scores.numpy()[2], np.float32([-0.3, -0.5]))
    assert after.lengths.numpy()[2].tolist() == [2, 3]
    # The other sentences' slots are untouched.
    for row in (0, 1):
        assert after.tokens.numpy()[row].tolist() == [[P] * 5] * 2
        assert after.lengths.numpy()[row].tolist() == [0, 0]


def test_reorder_cache_gathers_the_extended_beams_of_the_kept_sentences():
    # Three sentences of k = 2 hypotheses; each row of a window holds its index.
    cache = (
        tf.reshape(tf.range(6.0), [6, 1, 1]) * tf.ones([1, 2, 3]),
        tf.reshape(tf.range(6.0), [6, 1, 1]) * tf.ones([1, 1, 5]),
    )
    reordered = reorder_cache(cache, tf.constant([[1, 0], [1, 1]]), tf.constant([0, 2]), 2)
    for window in reordered:
        np.testing.assert_array_equal(window.numpy()[:, 0, 0], [1, 0, 5, 5])
    assert reordered[0].shape == (4, 2, 3) and reordered[1].shape == (4, 1, 5)


def hand_made_state(sentence_ids, batch_size, k=2, width=4, source_length=3, step=1, growing=False):
    """A `BeamState` of active sentences `sentence_ids` out of `batch_size` (continuing
    histories `step` wide when `growing`, else `width`)."""
    active = len(sentence_ids)
    rows = tf.cast(tf.constant(sentence_ids), tf.float32)
    return BeamState(
        step=tf.constant(step),
        sentence_ids=tf.constant(sentence_ids),
        encoder_output=EncoderOutput(
            keys=rows[:, None, None] * tf.ones([1, source_length, 2]),
            values=rows[:, None, None] * tf.ones([1, source_length, 2]),
            source_mask=tf.ones([active, source_length], tf.bool),
        ),
        max_lengths=tf.constant(sentence_ids) + 10,
        cache=(tf.reshape(tf.range(float(active * k)), [active * k, 1, 1]),),
        last_tokens=tf.fill([active * k], 4),
        alive_scores=tf.fill([active, k], -1.0),
        alive_tokens=tf.fill([active, k, step if growing else width], 4),
        finished_count=tf.zeros([active], tf.int32),
        finished=FinishedHypotheses(
            tokens=tf.fill([batch_size, k, width], P),
            scores=tf.fill([batch_size, k], -np.inf),
            lengths=tf.zeros([batch_size, k], tf.int32),
        ),
        alive_attention=tf.zeros([active, k, step, source_length]),
        finished_attention=tf.zeros([batch_size, k, step, source_length]),
    )


@pytest.mark.parametrize("xla", [False, True])
def test_apply_selection_writes_only_the_active_sentences(xla):
    constants = StepConstants(beam_size=2, vocab_size=9, xla=xla)
    # Sentence 1 of 2 is active (all are, in a compiled step's fixed shapes).
    sentence_ids = [0, 1] if xla else [1]
    state = hand_made_state(sentence_ids, batch_size=2, growing=not xla)
    selection = make_selection(
        alive_scores=[[-1.5, -2.5]] * len(sentence_ids),
        alive_beams=[[1, 0]] * len(sentence_ids),
        next_tokens=[[5, 6]] * len(sentence_ids),
        finished_count=[1] * len(sentence_ids),
        slot_filled=[[True, False]] * len(sentence_ids),
        finish_beams=[[0, 0]] * len(sentence_ids),
        finish_scores=[[-0.7, 0.0]] * len(sentence_ids),
    )
    after = apply_selection(constants, state, selection, cache=("new cache",))
    assert after.cache == ("new cache",)
    assert after.last_tokens.numpy().tolist() == [5, 6] * len(sentence_ids)
    padding = [P, P] if xla else []
    assert after.alive_tokens.numpy()[-1].tolist() == [[4, 5] + padding, [4, 6] + padding]
    np.testing.assert_array_equal(after.alive_scores.numpy()[-1], [-1.5, -2.5])
    assert after.finished_count.numpy().tolist() == [1] * len(sentence_ids)
    # The whole batch's finished store: sentence 1 got slot 0.
    assert after.finished.tokens.numpy()[1, 0].tolist() == [4, EOS, P, P]
    assert after.finished.lengths.numpy()[1].tolist() == [2, 0]
    if not xla:
        assert after.finished.lengths.numpy()[0].tolist() == [0, 0]
        assert np.all(after.finished.scores.numpy()[0] == -np.inf)
    assert after.step.numpy() == 1 and after.sentence_ids is state.sentence_ids


def test_record_attention_extends_the_chosen_attention_histories():
    constants = StepConstants(beam_size=2, vocab_size=9, return_attention=True)
    # Sentence 1 of 2 active; one step of history so far, source length 3.
    state = hand_made_state([1], batch_size=2, step=1)
    state = state._replace(
        alive_attention=tf.constant([[[[0.1, 0.2, 0.7]], [[0.3, 0.3, 0.4]]]]),
    )
    attention = tf.constant([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    selection = make_selection(
        alive_beams=[[1, 1]], slot_filled=[[False, True]], finish_beams=[[0, 0]]
    )
    after = record_attention(constants, state, selection, attention)
    expected_alive = [[[0.3, 0.3, 0.4], [0.0, 0.0, 1.0]]] * 2
    np.testing.assert_allclose(after.alive_attention.numpy()[0], expected_alive)
    finished = after.finished_attention.numpy()
    assert finished.shape == (2, 2, 2, 3)
    np.testing.assert_allclose(finished[1, 1], [[0.1, 0.2, 0.7], [1.0, 0.0, 0.0]])
    # Unfilled slots and inactive sentences keep zeros.
    assert not finished[1, 0].any() and not finished[0].any()


def test_drop_finished_sentences_keeps_the_others_with_their_caches():
    constants = StepConstants(beam_size=2, vocab_size=9)
    state = hand_made_state([0, 2, 3], batch_size=4)
    state = state._replace(
        finished_count=tf.constant([2, 1, 2]),
        alive_scores=tf.constant([[-1.0, -2.0], [-3.0, -4.0], [-5.0, -6.0]]),
    )
    selection = make_selection(
        alive_beams=[[0, 1], [1, 1], [0, 0]], next_tokens=[[4, 5], [6, 7], [8, 9]]
    )
    after = drop_finished_sentences(constants, state, selection)
    assert after.sentence_ids.numpy().tolist() == [2]
    assert after.max_lengths.numpy().tolist() == [12]
    np.testing.assert_array_equal(after.encoder_output.keys.numpy(), np.full([1, 3, 2], 2.0))
    np.testing.assert_array_equal(after.alive_scores.numpy(), [[-3.0, -4.0]])
    assert after.finished_count.numpy().tolist() == [1]
    assert after.last_tokens.numpy().tolist() == [6, 7]
    # Sentence 2 was the second active one: its hypotheses' caches are rows 2 and 3.
    assert after.cache[0].numpy()[:, 0, 0].tolist() == [3.0, 3.0]
    assert after.finished is state.finished


def test_first_step_extends_the_first_beam_only_and_compiles_the_same():
    model = tiny_model(target_vocab_size=9, seed=12)
    source = tf.constant([[5, 6, 7, 2], [1, 1, 8, 2]])
    results = {}
    for xla in (False, True):
        constants = StepConstants(beam_size=3, vocab_size=9, return_attention=True, xla=xla)
        state = initial_beam_state(
            3,
            encoder_output=model.encode(source),
            max_lengths=tf.constant([6, 6]),
            cache=model.decoder.initial_state(6),
            width=7,
            source_length=4,
            growing=constants.drop_finished,
        )
        after, selection, attention = search_step_function(model.decoder, constants)(state)
        results[xla] = after, selection, attention
        # Only the first copy of each beam was alive: every hypothesis extends it.
        assert selection.alive_beams.numpy().tolist() == [[0, 0, 0]] * 2
        assert after.alive_tokens.shape[2] == (7 if xla else 1)
        assert after.alive_tokens.numpy()[:, :, 1:].tolist() == [[[P] * 6 if xla else []] * 3] * 2
        assert attention.shape == (6, 4)
        assert after.alive_attention is state.alive_attention
    eager, compiled = results[False], results[True]
    np.testing.assert_array_equal(eager[0].alive_tokens, compiled[0].alive_tokens[:, :, :1])
    np.testing.assert_allclose(eager[0].alive_scores, compiled[0].alive_scores, atol=1e-5)
