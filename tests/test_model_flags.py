"""The model flags: every family's overrides defined once, applied to its own preset,
refused for another family."""

import pytest
from absl import flags
from helpers.flag_values import parsed_flags

from pipelines.flags.model import model_config_from_flags


def test_posenet_flags_override_its_preset():
    config = model_config_from_flags(
        100,
        parsed_flags(
            "--family=posenet",
            "--preset=posenet_multi30k_cpu",
            "--hidden_dim=32",
            "--num_heads=4",
            "--encoder_layers=3",
            "--cross_attention=after",
            "--nodecoder_self_attention",
        ),
    )
    assert config["family"] == "posenet" and config["hidden_dim"] == 32
    assert config["encoder_layers"] == 3 and config["decoder_layers"] == 5  # the preset's
    assert config["cross_attention"] == "after" and config["decoder_self_attention"] is False
    assert config["source_vocab_size"] == config["target_vocab_size"] == 100


def test_a_shared_flag_means_what_each_family_says():
    flag_values = parsed_flags("--encoder_layers=[(16, 3)] * 2", "--embed_dim=16")
    convs2s = model_config_from_flags(100, flag_values)
    assert convs2s["family"] == "convs2s" and convs2s["encoder_layers"] == "[(16, 3), (16, 3)]"
    help_text = flag_values["encoder_layers"].help
    assert "convs2s: encoder layer spec" in help_text and "posenet: encoder layers" in help_text


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--embed_dim=16"], "--embed_dim does not apply to --family=posenet (its flags: "),
        (["--encoder_layers=[(16, 3)]"], "PoseNet takes a number of layers"),
        (["--encoder_layers=0"], "PoseNet needs at least one layer"),
        (["--preset=multi30k_cpu"], "is not a preset of --family=posenet"),
        (["--hidden_dim=36", "--num_heads=8"], "does not split into num_heads=8"),
        (["--hidden_dim=31"], "hidden_dim must be even"),
    ],
)
def test_flags_the_family_cannot_take_are_refused(arguments, message):
    base = ["--family=posenet", "--preset=posenet_multi30k_cpu"]
    with pytest.raises(
        flags.ValidationError, match=message.replace("(", r"\(").replace("[", r"\[")
    ):
        model_config_from_flags(100, parsed_flags(*base, *arguments))


def _parameters(*arguments):
    from convs2s_tf.runs import build_model

    flag_values = parsed_flags(*arguments)
    return build_model(model_config_from_flags(8000, flag_values)).count_params()


def test_posenet_matches_convs2s_parameters_as_preset_and_as_config(monkeypatch):
    """The PoseNet preset is within 5% of ConvS2S's `multi30k_cpu`; the PoseNet config
    within 5% of the default config's ConvS2S (whose output embedding is tied)."""
    import os

    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    convs2s_preset = _parameters("--preset=multi30k_cpu")
    posenet_preset = _parameters("--family=posenet", "--preset=posenet_multi30k_cpu")
    assert abs(posenet_preset / convs2s_preset - 1) < 0.05
    convs2s_config = _parameters("--flagfile=configs/multi30k_en_de.cfg")
    posenet_config = _parameters("--flagfile=configs/posenet_multi30k.cfg")
    assert abs(posenet_config / convs2s_config - 1) < 0.05
    assert (convs2s_config, posenet_config) == (8_048_448, 8_300_592)
    # The paper's arm: grouped separability and one table, widened to the same count.
    paper_config = _parameters("--flagfile=configs/posenet_paper_multi30k.cfg")
    assert paper_config == 7_901_372
