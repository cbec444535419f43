"""Tests of the parameter summary."""

import numpy as np
from helpers.models import TARGET_VOCAB, varied_model

from convs2s_tf.models import format_summary, parameter_counts


def test_summary_counts_every_parameter():
    model = varied_model()
    rows = dict(parameter_counts(model))
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    assert sum(rows.values()) == trainable
    assert rows["decoder/token_embedding"] == TARGET_VOCAB * 8
    text = format_summary(model)
    assert "decoder/attention" in text and f"{sum(rows.values()):,}" in text
