"""Tests of the safe layer-spec parser."""

import pytest

from convs2s_tf.models import (
    LayerSpec,
    LayerSpecError,
    format_layer_spec,
    parse_attention_spec,
    parse_layer_spec,
)
from convs2s_tf.models.convs2s.layer_spec import (
    MAX_CHANNELS,
    MAX_KERNEL_WIDTH,
    MAX_LAYERS,
    MAX_SPEC_CHARS,
    normalise_layer_spec,
)


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


@pytest.mark.parametrize(
    "spec, limit",
    [
        # Each term is within MAX_LAYERS; only the sum is not.
        (" + ".join(["[(512,3)]*1000"] * 3), f"MAX_LAYERS={MAX_LAYERS}"),
        ("[(8,3)]" + " + [(8,3)]" * MAX_LAYERS, f"MAX_LAYERS={MAX_LAYERS}"),
        ("[True]*1000 + [True]*1000", f"MAX_LAYERS={MAX_LAYERS}"),
        ("[(8,3)]*" + "9" * 30, f"MAX_LAYERS={MAX_LAYERS}"),
        (f"[(512,3), ({MAX_CHANNELS + 1},3)]", f"MAX_CHANNELS={MAX_CHANNELS}"),
        ("[(" + "9" * 100 + ",3)]", f"MAX_CHANNELS={MAX_CHANNELS}"),
        (f"[(512,{MAX_KERNEL_WIDTH + 1})]", f"MAX_KERNEL_WIDTH={MAX_KERNEL_WIDTH}"),
        ("[(8,3)]" + "*1" * 5000, "nested too deeply"),
        ("[(8,3)]" + " " * MAX_SPEC_CHARS, f"MAX_SPEC_CHARS={MAX_SPEC_CHARS}"),
    ],
    ids=[
        "sum-of-repeats",
        "chain-of-one-layer-terms",
        "attention-sum",
        "huge-repeat",
        "channels",
        "huge-channels",
        "kernel-width",
        "deep-product",
        "long-text",
    ],
)
def test_oversized_layer_specs_are_one_line_naming_the_limit(spec, limit):
    with pytest.raises(LayerSpecError) as error:
        parse_layer_spec(spec)
    message = str(error.value)
    assert limit in message and "\n" not in message and len(message) < 400


def test_attention_specs_are_bounded_too():
    with pytest.raises(LayerSpecError, match=f"MAX_LAYERS={MAX_LAYERS}"):
        parse_attention_spec("[True]*1000 + [True]*1000", 2000)


def test_largest_allowed_specs_parse():
    # A chain of MAX_LAYERS one-layer terms is longer than Python's recursion limit.
    assert len(parse_layer_spec("[(8,3)]" + " + [(8,3)]" * (MAX_LAYERS - 1))) == MAX_LAYERS
    # The longest text: every limit reached, each residual from the input.
    widest = [LayerSpec(MAX_CHANNELS, MAX_KERNEL_WIDTH, index + 1) for index in range(MAX_LAYERS)]
    assert parse_layer_spec(format_layer_spec(widest)) == widest
    with pytest.raises(LayerSpecError, match=f"MAX_LAYERS={MAX_LAYERS}"):
        normalise_layer_spec([(8, 3)] * (MAX_LAYERS + 1))


@pytest.mark.parametrize(
    "encoder_layers, limit",
    [
        (" + ".join(["[(512,3)]*1000"] * 1000), f"MAX_LAYERS={MAX_LAYERS}"),
        ("[(1000000000, 3)]", f"MAX_CHANNELS={MAX_CHANNELS}"),
    ],
    ids=["layers", "channels"],
)
def test_a_crafted_fairseq_checkpoint_is_refused_before_anything_is_built(encoder_layers, limit):
    from convs2s_tf.interop.fairseq_checkpoint import FairseqImportError
    from convs2s_tf.interop.fairseq_model import model_config

    settings = {
        "encoder_layers": encoder_layers,
        "decoder_layers": "[(512, 3)]",
        "decoder_attention": "True",
    }
    with pytest.raises(FairseqImportError, match="checkpoint's encoder_layers") as error:
        model_config(settings, {}, 10, 10)
    assert limit in str(error.value)
