"""Tests of `TrainingConfig`."""

import pytest

from convs2s_tf.training import TrainingConfig


def test_config_validation():
    with pytest.raises(ValueError, match="min_learning_rate=0.5 must be below"):
        TrainingConfig(min_learning_rate=0.5).validate()
    with pytest.raises(ValueError, match="update_freq"):
        TrainingConfig(update_freq=0).validate()
    with pytest.raises(ValueError, match="average_last_n must be >= 0"):
        TrainingConfig(average_last_n=-1).validate()
