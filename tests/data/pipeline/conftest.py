"""Fixtures of the tf.data pipeline tests: the small prepared corpus and its tokenizer."""

import pytest

from convs2s_tf.data.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def data(small_prepared):
    return small_prepared.data


@pytest.fixture(scope="module")
def tokenizer(data):
    return Tokenizer(data.sentencepiece_model_path)
