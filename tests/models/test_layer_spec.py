"""Tests of the safe layer-spec parser."""

import pytest

from convs2s_tf.models import LayerSpecError, parse_layer_spec


@pytest.mark.parametrize(
    "spec, quoted",
    [
        ("[(512,3)]*9 + __import__('os')", "__import__('os')"),
        ("[(512, 3.5)]", "3.5"),
        ("[(512,3)] * x", "x"),
        ("[(512,3)] ** 2", "[(512,3)] ** 2"),
        ("[(512,3)] + (1,2)", "[(512,3)] + (1,2)"),
        ("[(512,)]", "(512,)"),
        ("[(0,3)]", "(0, 3)"),
        ("[(8,3,2)]", "residual distance 2"),
        ("[(512,3)", "never closed"),
        ("[]", "non-empty"),
        ("", "empty"),
    ],
)
def test_malformed_layer_specs_are_rejected(spec, quoted):
    with pytest.raises(LayerSpecError) as error:
        parse_layer_spec(spec)
    assert quoted in str(error.value)
    assert repr(spec) in str(error.value)


def test_layer_spec_parser_never_evaluates(tmp_path):
    marker = tmp_path / "pwned"
    spec = f"[(1,1)] + [open({str(marker)!r}, 'w')]"
    with pytest.raises(LayerSpecError):
        parse_layer_spec(spec)
    assert not marker.exists()


def test_layer_spec_examples():
    spec = parse_layer_spec("[(512,3)]*9 + [(1024,3)]*4 + [(2048,1)]*2")
    assert len(spec) == 15
    assert spec[0] == (512, 3, 1) and spec[9] == (1024, 3, 1) and spec[-1] == (2048, 1, 1)
    assert parse_layer_spec("[(8, 3, 0), (8, 3, 2)]")[1].residual == 2
    assert parse_layer_spec("2 * [(8, 3)]") == parse_layer_spec("[(8, 3)] * 2")
