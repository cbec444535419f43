"""Tests of the epoch's progress reports."""

import math

import pytest
from helpers.summaries import RecordingSummaries

from convs2s_tf.training.progress import EpochProgress


def test_epoch_progress_logs_every_interval():
    summaries = RecordingSummaries()
    progress = EpochProgress(summaries, log_every_steps=2, steps_per_epoch=5, show_bar=False)
    result = {"loss": 2.0, "nll": 1.5, "tokens": 100.0, "gradient_norm": 0.5}
    for step in range(1, 6):
        progress.update(step, step, result, learning_rate=0.25)
    assert [step for _, step, _ in summaries.scalar_calls] == [2, 4]
    values = summaries.scalar_calls[0][2]
    assert values["perplexity"] == pytest.approx(math.exp(1.5))
    assert values["learning_rate"] == 0.25 and values["tokens_per_second"] > 0
    assert progress.tokens_per_second() > 0
