"""Tests of the beam search's loop state."""

import numpy as np
import pytest
import tensorflow as tf

from convs2s_tf.decoding.beam_state import initial_beam_state, shape_invariants
from convs2s_tf.decoding.step_constants import StepConstants
from convs2s_tf.models import EncoderOutput
from convs2s_tf.models.families import build_model, with_family
from convs2s_tf.vocabulary import EOS_ID, PAD_ID

NEG_INF = float("-inf")


def small_decoder(family):
    """The decoder of a small model of `family` (a window of 2 positions, width 8)."""
    if family == "convs2s":
        config = dict(embed_dim=8, encoder_layers="[(8, 3)]", decoder_layers="[(8, 3)]")
        config.update(decoder_out_embed_dim=8)
    else:
        config = dict(hidden_dim=8, encoder_layers=1, decoder_layers=1, num_heads=2, ffn_dim=8)
    model = build_model(
        with_family(family, dict(source_vocab_size=9, target_vocab_size=9, **config))
    )
    model.build()
    return model.decoder


def two_sentence_state(beam_size=3, growing=False, decoder=None):
    encoder_output = EncoderOutput(
        keys=tf.zeros([2, 4, 8]), values=tf.zeros([2, 4, 8]), source_mask=tf.ones([2, 4], tf.bool)
    )
    decoder = decoder or small_decoder("convs2s")
    return initial_beam_state(
        beam_size,
        encoder_output=encoder_output,
        max_lengths=tf.constant([5, 7]),
        cache=decoder.initial_state(2 * beam_size),
        width=8,
        source_length=4,
        growing=growing,
    )


def test_initial_state_has_one_live_beam_per_sentence_and_empty_slots():
    state = two_sentence_state()
    assert state.step.numpy() == 0
    assert state.sentence_ids.numpy().tolist() == [0, 1]
    # Only the first copy of each sentence's beam is expanded at the first step.
    np.testing.assert_array_equal(state.alive_scores.numpy(), [[0.0, NEG_INF, NEG_INF]] * 2)
    assert state.last_tokens.numpy().tolist() == [EOS_ID] * 6
    assert np.all(state.alive_tokens.numpy() == PAD_ID) and state.alive_tokens.shape == (2, 3, 8)
    assert state.finished_count.numpy().tolist() == [0, 0]
    assert np.all(state.finished.tokens.numpy() == PAD_ID)
    assert np.all(state.finished.scores.numpy() == NEG_INF)
    assert state.finished.lengths.numpy().tolist() == [[0, 0, 0]] * 2
    assert state.alive_attention.shape == (2, 3, 0, 4)
    assert state.finished_attention.shape == (2, 3, 0, 4)


def test_growing_histories_start_empty_beside_a_full_width_finished_store():
    state = two_sentence_state(growing=True)
    assert state.alive_tokens.shape == (2, 3, 0)
    assert state.finished.tokens.shape == (2, 3, 8)


@pytest.mark.parametrize("xla", [False, True])
def test_shape_invariants_free_what_a_step_changes(xla):
    constants = StepConstants(beam_size=3, vocab_size=9, xla=xla)
    decoder = small_decoder("convs2s")
    state = two_sentence_state(decoder=decoder)
    invariants = shape_invariants(constants, state, decoder)
    assert type(invariants) is type(state)
    # Sentences leave the batch unless a compiled step keeps its shapes.
    active = [2] if xla else [None]
    assert invariants.sentence_ids.as_list() == active
    assert invariants.encoder_output.keys.as_list() == active + [4, 8]
    assert invariants.cache[0].as_list() == [None, 2, 8]
    assert invariants.alive_scores.as_list() == [None, 3]
    assert invariants.alive_tokens.as_list() == [None, 3, None]
    assert invariants.finished_attention.as_list() == [None, 3, None, None]
    for shape, tensor in zip(tf.nest.flatten(invariants), tf.nest.flatten(state)):
        assert shape.is_compatible_with(tensor.shape)


def test_shape_invariants_free_the_position_axis_of_a_growing_decoder_state():
    constants = StepConstants(beam_size=3, vocab_size=9)
    decoder = small_decoder("posenet")
    state = two_sentence_state(decoder=decoder)
    (layer,) = shape_invariants(constants, state, decoder).cache
    # Self-attention buffers [hypotheses, heads, positions, head_dim] grow, and so do
    # the convolutions' windows [hypotheses, positions, channels] (up to their spans).
    assert layer["self_attention"]["keys"].as_list() == [None, 2, None, 4]
    assert layer["self_attention"]["values"].as_list() == [None, 2, None, 4]
    assert [window.as_list() for window in layer["box_1"]] == [[None, None, 8]] * 2
