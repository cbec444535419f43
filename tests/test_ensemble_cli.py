"""Ensembles in the pipelines: translate, evaluate and export with --model_dir=RUN_A,RUN_B."""

import json
import shutil

import pytest
import tensorflow as tf
from conftest import SEARCH_FLAGS
from helpers.in_process import run_in_process

from convs2s_tf.export import find_saved_model
from convs2s_tf.export.translation_module import (
    ATTENTION_SIGNATURE,
    IDS_SIGNATURE,
    NBEST_SIGNATURE,
    TRANSLATE_SIGNATURE,
)
from convs2s_tf.inference import load_inference_model
from convs2s_tf.layers.folded_kernels import foldable_layers

LINES = ["A man is riding a bicycle.", "Two dogs play in the snow.", "", "A girl smiles."]


def _run(arguments, stdin=None):
    result = run_in_process(arguments, stdin, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _nbest_rows(stdout):
    return [line.split(" ||| ") for line in stdout.splitlines()]


@pytest.mark.slow  # translate, evaluate and export, each of a run and of an ensemble
def test_translate_evaluate_export_an_ensemble(tiny_run, small_prepared, tmp_path):
    pair = f"--model_dir={tiny_run},{tiny_run}"
    stdin = "\n".join(LINES) + "\n"
    nbest = ["--nbest=3", *SEARCH_FLAGS]
    single = _run(["pipelines.translate", f"--model_dir={tiny_run}", *nbest], stdin)
    ensemble = _run(["pipelines.translate", pair, *nbest], stdin)
    single_rows, ensemble_rows = _nbest_rows(single.stdout), _nbest_rows(ensemble.stdout)
    # An ensemble of a run with itself is the run (scores are printed to 4 decimals).
    assert [row[:2] for row in ensemble_rows] == [row[:2] for row in single_rows]
    for single_row, ensemble_row in zip(single_rows, ensemble_rows):
        assert abs(float(single_row[2]) - float(ensemble_row[2])) <= 1e-4

    export_dir = tmp_path / "saved_models" / "pair"
    exported = _run(["pipelines.export", pair, f"--export_dir={export_dir}", *SEARCH_FLAGS])
    assert f"{export_dir}/1" in exported.stdout
    loaded = tf.saved_model.load(find_saved_model(str(export_dir)))
    assert set(loaded.signatures) == {
        TRANSLATE_SIGNATURE,
        NBEST_SIGNATURE,
        IDS_SIGNATURE,
        ATTENTION_SIGNATURE,
    }
    # Both members' weights are in the SavedModel (2 x the single model's), each once:
    # a folded kernel stands for the variables it replaces.
    single_model = load_inference_model(str(tiny_run)).model
    foldable = foldable_layers(single_model)
    replaced = sum(len(layer.folded_variables) for layer in foldable)
    assert len(loaded.model_variables) == 2 * (len(single_model.variables) - replaced)
    assert len(loaded.folded_kernels) == 2 * len(foldable)
    served = _run(["pipelines.translate", f"--saved_model={export_dir}", "--nbest=3"], stdin)
    served_rows = _nbest_rows(served.stdout)
    assert [row[:2] for row in served_rows] == [row[:2] for row in ensemble_rows]
    for served_row, ensemble_row in zip(served_rows, ensemble_rows):
        assert abs(float(served_row[2]) - float(ensemble_row[2])) <= 1e-4

    # The first 40 test pairs: a random model's searches run to their length limit.
    source, reference = tmp_path / "test.en", tmp_path / "test.de"
    for path, split_path in zip((source, reference), small_prepared.data.split_paths("test")):
        with open(split_path, encoding="utf-8") as split_file:
            path.write_text("".join(split_file.readlines()[:40]), encoding="utf-8")
    scores = [
        json.loads(
            _run(
                [
                    "pipelines.evaluate",
                    model,
                    f"--source={source}",
                    f"--reference={reference}",
                    "--json",
                    *SEARCH_FLAGS,
                ]
            ).stdout.splitlines()[-1]
        )
        for model in (f"--model_dir={tiny_run}", pair)
    ]
    assert scores[0]["bleu"] == scores[1]["bleu"] and scores[1]["sentences"] == 40


def test_an_ensemble_of_other_vocabularies_is_a_usage_error(tiny_run, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(tiny_run, other)
    config = json.loads((other / "config.json").read_text())
    config["model"]["source_vocab_size"] += 1
    (other / "config.json").write_text(json.dumps(config))
    result = run_in_process(
        ["pipelines.translate", f"--model_dir={tiny_run},{other}"], "x\n", check=False
    )
    assert result.returncode == 2
    assert str(tiny_run) in result.stderr and str(other) in result.stderr
    assert "source vocabulary size" in result.stderr and "Traceback" not in result.stderr
