"""Loading ensembles of runs (`--model_dir=RUN_A,RUN_B`): members, checkpoints, vocabularies."""

import json
import shutil

import pytest

from convs2s_tf.decoding import Ensemble, SearchConfig
from convs2s_tf.export import list_exporters
from convs2s_tf.inference import InferenceError, load_inference_model
from convs2s_tf.inference.ensembles import member_checkpoints, split_paths

SEARCH = SearchConfig(beam_size=3, max_len_a=1.2, max_len_b=5)
TEXTS = ["A man is riding a bicycle.", "Two dogs play in the snow.", ""]


def _copy_run(tiny_run, destination, **config_changes):
    """A copy of `tiny_run` whose config.json has `config_changes` applied."""
    shutil.copytree(tiny_run, destination)
    config_path = destination / "config.json"
    config = json.loads(config_path.read_text())
    for key, value in config_changes.items():
        if key in config["model"]:
            config["model"][key] = value
        else:
            config[key] = value
    config_path.write_text(json.dumps(config))
    return destination


def test_split_paths_and_member_checkpoints():
    assert split_paths("a, b,") == ["a", "b"]
    assert split_paths(["a", "b"]) == ["a", "b"]
    assert split_paths(None) == []
    assert member_checkpoints(["a", "b"], None) == [None, None]
    assert member_checkpoints(["a", "b"], "x,y") == ["x", "y"]
    with pytest.raises(InferenceError, match="names 1 checkpoint.* for 2 run directories"):
        member_checkpoints(["a", "b"], "x")


def test_ensemble_of_a_run_with_itself_translates_as_the_run(tiny_run):
    single = load_inference_model(str(tiny_run), search_config=SEARCH)
    pair = load_inference_model(f"{tiny_run},{tiny_run}", search_config=SEARCH)
    assert isinstance(pair.model, Ensemble) and len(pair.model.members) == 2
    # Two loads: each member has its own variables.
    assert pair.model.members[0] is not pair.model.members[1]
    assert pair.model_dir == f"{tiny_run},{tiny_run}"
    assert pair.checkpoint == f"{single.checkpoint},{single.checkpoint}"
    assert pair.exporter_name == "ensemble" and single.exporter_name == "text"
    assert "ensemble" in list_exporters()
    # Without warm-up: one batch is searched in graph mode, no bucket compiled.
    expected = single.translator(warm_up=False).translate(TEXTS, nbest=3)
    actual = pair.translator(warm_up=False).translate(TEXTS, nbest=3)
    for expected_row, actual_row in zip(expected, actual):
        assert [text for text, _ in actual_row] == [text for text, _ in expected_row]
        for (_, expected_score), (_, actual_score) in zip(expected_row, actual_row):
            assert actual_score == pytest.approx(expected_score, abs=1e-5)


def test_runs_of_other_vocabularies_are_refused_naming_both(tiny_run, tmp_path):
    run_config = json.loads((tiny_run / "config.json").read_text())
    other_model = tmp_path / "other.model"
    other_model.write_bytes(open(run_config["sentencepiece_model"], "rb").read() + b"\0")
    other = _copy_run(tiny_run, tmp_path / "other_pieces", sentencepiece_model=str(other_model))
    with pytest.raises(InferenceError) as error:
        load_inference_model(f"{tiny_run},{other}", search_config=SEARCH)
    message = str(error.value)
    assert str(tiny_run) in message and str(other) in message
    assert "SentencePiece model" in message
    wider = _copy_run(tiny_run, tmp_path / "wider", target_vocab_size=777)
    with pytest.raises(InferenceError, match="target vocabulary size") as error:
        load_inference_model(f"{tiny_run},{tiny_run},{wider}", search_config=SEARCH)
    assert str(wider) in str(error.value)


def test_checkpoints_name_one_per_run(tiny_run):
    single = load_inference_model(str(tiny_run), search_config=SEARCH)
    pair = load_inference_model(
        f"{tiny_run},{tiny_run}",
        checkpoint=f"{single.checkpoint},{single.checkpoint}",
        search_config=SEARCH,
    )
    assert pair.checkpoint == f"{single.checkpoint},{single.checkpoint}"
    with pytest.raises(InferenceError, match="one per run"):
        load_inference_model(
            f"{tiny_run},{tiny_run}", checkpoint=single.checkpoint, search_config=SEARCH
        )
