"""Tests of the `PaddedNormal` initializer."""

import numpy as np
from helpers.layer_test import run_serialization_test

from convs2s_tf.layers import PaddedNormal


def test_config_and_serialization_round_trip():
    run_serialization_test(PaddedNormal(stddev=0.05, pad_id=2, seed=3))


def test_padded_normal_zero_row_and_std():
    table = PaddedNormal(stddev=0.1, pad_id=1, seed=3)((2000, 64)).numpy()
    np.testing.assert_array_equal(table[1], 0.0)
    assert abs(np.delete(table, 1, axis=0).std() - 0.1) < 0.003
