"""Tests of `SinusoidalTiming`."""

import math

import numpy as np
import pytest
import tensorflow as tf
from helpers.layer_test import run_layer_test

from convs2s_tf.models.posenet.sinusoidal_timing import SinusoidalTiming
from convs2s_tf.vocabulary import PAD_ID


@pytest.mark.parametrize("channels", [8, 7])
def test_layer_contract(channels):
    tokens = tf.constant([[5, 6, 7, 2], [8, 4, 9, 2]])  # padding: below
    run_layer_test(
        SinusoidalTiming,
        {"channels": channels},
        tokens,
        expected_output_shape=(2, 4, channels),
        build_shape=None,
        expected_output_dtype="float32",
        step_fn=lambda layer, t, state: (
            tf.broadcast_to(layer.step_signal(t), [2, channels]),
            state,
        ),
        mixed_precision_output_dtype="bfloat16",
    )


def test_signal_is_sines_then_cosines_of_geometric_timescales():
    timing = SinusoidalTiming(channels=6, min_timescale=1.0, max_timescale=100.0)
    signal = timing(tf.constant([[5, 6, 7, 8]])).numpy()[0]
    timescales = np.array([1.0, 10.0, 100.0])  # geometric over channels // 2 = 3
    positions = np.arange(4)[:, None]
    expected = np.concatenate([np.sin(positions / timescales), np.cos(positions / timescales)], 1)
    np.testing.assert_allclose(signal, expected, atol=1e-6)
    assert math.isclose(signal[0, 3], 1.0)  # cos(0)


def test_positions_ignore_padding():
    timing = SinusoidalTiming(channels=8)
    left = timing(tf.constant([[PAD_ID, PAD_ID, 5, 6, 2]])).numpy()[0]
    right = timing(tf.constant([[5, 6, 2, PAD_ID, PAD_ID]])).numpy()[0]
    np.testing.assert_allclose(left[2:], right[:3], atol=1e-6)
    assert not left[:2].any() and not right[3:].any()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="at least 2 channels"):
        SinusoidalTiming(channels=1)
    with pytest.raises(ValueError, match="min_timescale <= max_timescale"):
        SinusoidalTiming(channels=4, min_timescale=10.0, max_timescale=1.0)
