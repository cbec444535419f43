"""Tests of `SearchConfig`, the one home of the search settings."""

import pytest

from convs2s_tf.decoding import SearchConfig


def test_search_config_refuses_settings_that_cannot_work():
    assert SearchConfig().validate() == SearchConfig()
    cases = [
        (dict(min_length=50, max_len_b=10), "`min_length=50` exceeds the maximum output"),
        (dict(beam_size=0), "`beam_size` must be >= 1"),
        (dict(beam_size=5, nbest=6), "`nbest=6` must be between 1 and `beam_size=5`"),
        (dict(dtype="float16"), "dtype must be one of"),
    ]
    for changes, message in cases:
        with pytest.raises(ValueError, match=message) as raised:
            SearchConfig(**changes).validate()
        # The library names its parameters, not the command line's flags.
        assert "--" not in str(raised.value)
    with pytest.raises(ValueError, match="exceeds the model's longest output"):
        SearchConfig(min_length=45, max_len_a=2.0).validate(model_max_length=40)
