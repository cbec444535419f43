"""Tests of checkpoint averaging (fairseq's scripts/average_checkpoints.py)."""

import json

import numpy as np
import pytest
import tensorflow as tf
from helpers.models import randomize_weights, small_model_config

from convs2s_tf.decoding import SearchConfig
from convs2s_tf.inference import CheckpointTranslator
from convs2s_tf.runs import CheckpointError, RunDirectory, build_model, load_trained_model
from convs2s_tf.runs.averaging import (
    average_checkpoints,
    last_checkpoints,
    write_averaged_checkpoint,
    write_averaged_run,
)

MODEL_CONFIG = small_model_config(24, width=8, blocks=1, max_positions=16)


def _run_with_checkpoints(path, seeds, model_config=MODEL_CONFIG):
    """A run directory whose checkpoints/ holds one random model per seed (steps 10,
    20, ...); returns it and the models' weights."""
    run = RunDirectory(path)
    run.write_config({"model": model_config, "sentencepiece_model": None})
    model = build_model(model_config)
    manager = run.checkpoint_manager(tf.train.Checkpoint(model=model), max_to_keep=5)
    weights = []
    for number, seed in enumerate(seeds, start=1):
        randomize_weights(model, seed=seed)
        manager.save(checkpoint_number=10 * number)
        weights.append([variable.numpy() for variable in model.weights])
    return run, weights


def test_two_checkpoints_average_to_the_element_wise_mean(tmp_path):
    run, (first, second) = _run_with_checkpoints(tmp_path / "run", seeds=[1, 2])
    model = build_model(MODEL_CONFIG)
    average_checkpoints(run.recent_checkpoints(), model)
    for variable, a, b in zip(model.weights, first, second):
        assert np.abs(a - b).max() > 0.01, variable.path  # the checkpoints differ
        np.testing.assert_allclose(variable.numpy(), (a + b) / 2, rtol=0, atol=1e-6)


def test_averaged_run_of_a_checkpoint_with_itself_translates_identically(tiny_run, tmp_path):
    source = RunDirectory(tiny_run)
    path = source.find_checkpoint()
    written = write_averaged_run(tiny_run, [path, path], tmp_path / "averaged")
    output = RunDirectory(tmp_path / "averaged")
    assert written == output.find_checkpoint() == output.best_checkpoint()
    config = output.read_config()
    assert config["averaged_from"] == [path, path]
    assert config["model"] == source.read_config()["model"]
    search = SearchConfig(beam_size=3, max_len_a=1.2, max_len_b=5)
    texts = ["A man rides a bike.", "Two dogs play in the snow.", "Hello"]
    translations = []
    for model_dir in (tiny_run, output.path):
        model, tokenizer, _, _ = load_trained_model(model_dir)
        translations.append(CheckpointTranslator(model, tokenizer, search).translate(texts))
    assert translations[0] == translations[1]


def test_training_run_averages_into_its_averaged_directory(tmp_path):
    run, weights = _run_with_checkpoints(tmp_path / "run", seeds=[1, 2, 3])
    paths = last_checkpoints(run.recent_checkpoints(), 2, run.checkpoints_dir)
    assert [path.rsplit("-", 1)[-1] for path in paths] == ["20", "30"]
    written = write_averaged_checkpoint(run.path, paths)
    assert written.startswith(run.absolute().averaged_dir)
    # Inference and the test score now take the averaged model.
    assert run.find_checkpoint() == written == run.averaged_checkpoint()
    model, _, _, _ = load_trained_model(run.path)
    for variable, b, c in zip(model.weights, weights[1], weights[2]):
        np.testing.assert_allclose(variable.numpy(), (b + c) / 2, rtol=0, atol=1e-6)


def test_refuses_other_models_and_too_few_checkpoints(tmp_path):
    run, _ = _run_with_checkpoints(tmp_path / "run", seeds=[1, 2])
    other_config = small_model_config(24, width=12, blocks=1, max_positions=16)
    other, _ = _run_with_checkpoints(tmp_path / "other", seeds=[3], model_config=other_config)
    mixed = run.recent_checkpoints() + other.recent_checkpoints()
    with pytest.raises(CheckpointError, match="whose model differs .* only checkpoints of one"):
        write_averaged_run(run.path, mixed, tmp_path / "out")
    # A checkpoint outside any run directory is checked by restoring it.
    loose = build_model(other_config)
    loose_path = tf.train.Checkpoint(model=loose).save(str(tmp_path / "loose" / "x" / "ckpt"))
    with pytest.raises(CheckpointError, match="cannot be restored"):
        write_averaged_run(run.path, [loose_path], tmp_path / "out")
    with pytest.raises(ValueError, match="holds 2 checkpoints, fewer than the 3 asked for"):
        last_checkpoints(run.recent_checkpoints(), 3, run.checkpoints_dir)
    with pytest.raises(ValueError, match="is the source run"):
        write_averaged_run(run.path, run.recent_checkpoints(), run.path)
    with pytest.raises(ValueError, match="not an averaged one"):
        write_averaged_run(run.path, run.recent_checkpoints(), other.path)


def test_imported_run_files_stay_reachable_from_the_averaged_run(tmp_path):
    run, _ = _run_with_checkpoints(tmp_path / "run", seeds=[1])
    (tmp_path / "dict.txt").write_text("")
    entries = run.write_vocabulary(
        "fairseq_dictionary", str(tmp_path / "dict.txt"), str(tmp_path / "dict.txt"), None
    )
    run.write_config({"model": MODEL_CONFIG, **entries})
    write_averaged_run(run.path, run.recent_checkpoints(), tmp_path / "out")
    with open(tmp_path / "out" / "config.json") as f:
        files = RunDirectory(tmp_path / "out").vocabulary_files(json.load(f))
    assert files.source == str(tmp_path / "run" / "source_dict.txt")
