"""benchmarks.bare_step's minimal step: the decoder step's arithmetic written plainly
(its timings are the benchmark's)."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.models import (
    SOURCE_VOCAB,
    TARGET_VOCAB,
    random_tokens,
    randomize_weights,
    varied_model,
)

from benchmarks.bare_step import minimal_step, minimal_step_timer


@pytest.mark.parametrize("shared", [False, True])
def test_minimal_step_gives_the_decoder_steps_logits(shared, rng):
    # Widths that change (residual projections), residual distances 2 and 0, attention
    # in two of four blocks; with `shared`, the token table is the output projection.
    model = varied_model(share_decoder_input_output_embed=shared, decoder_out_embed_dim=8)
    randomize_weights(model)
    source = tf.constant(random_tokens(rng, [1, 6], SOURCE_VOCAB))
    encoder_output = model.encode(source)
    beam = 3
    step = minimal_step(model.decoder, encoder_output)
    state = minimal_state = model.decoder.initial_state(beam)
    tokens = tf.fill([beam], 2)
    for t in range(5):
        expected, _, state = model.decoder.step(tokens, t, state, encoder_output, beam)
        logits, minimal_state = step(tokens, tf.constant(t), minimal_state)
        np.testing.assert_allclose(logits.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
        tokens = tf.constant(random_tokens(rng, [beam], TARGET_VOCAB))


def test_minimal_step_timer_times_a_step():
    model = varied_model()
    encoder_output = model.encode(tf.constant([[5, 6, 7, 2]]))
    assert minimal_step_timer(model.decoder, encoder_output, beam=2)() > 0
