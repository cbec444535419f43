"""Tests of loading a run directory's model (and tokenizer) for inference."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from helpers.models import small_model_config

from convs2s_tf.runs import RunDirectory, build_model, load_trained_model

MODEL_CONFIG = small_model_config(24, width=8, blocks=1, max_positions=16)


@pytest.fixture(scope="module")
def model():
    return build_model(MODEL_CONFIG)


def test_load_trained_model(tmp_path, model):
    run = RunDirectory(tmp_path / "run")
    run.write_config({"model": MODEL_CONFIG, "sentencepiece_model": None})
    path = run.save_best(tf.train.Checkpoint(model=model))
    assert os.path.isabs(path) and path.startswith(run.best_dir)
    loaded, tokenizer, checkpoint, run_config = load_trained_model(run.path)
    assert checkpoint == path and tokenizer is None and run_config["model"] == MODEL_CONFIG
    for expected, actual in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(expected.numpy(), actual.numpy())
    with pytest.raises(ValueError, match="compute_dtype must be float32 or bfloat16"):
        load_trained_model(run.path, compute_dtype="float16")


def test_imported_run_needs_a_tokenizer_factory(tmp_path, model):
    for name in ("src.txt", "tgt.txt"):
        (tmp_path / name).write_text("")
    run = RunDirectory(tmp_path / "run")
    entries = run.write_vocabulary(
        "fairseq_dictionary", str(tmp_path / "src.txt"), str(tmp_path / "tgt.txt"), None
    )
    run.write_config({"model": MODEL_CONFIG, **entries})
    run.save_best(tf.train.Checkpoint(model=model))
    with pytest.raises(ValueError, match="fairseq_dictionary vocabularies: .*tokenizer_factory"):
        load_trained_model(run.path)
    calls = []

    def factory(model_dir, run_config, sentencepiece_model):
        calls.append((model_dir, run_config, sentencepiece_model))
        return "tokenizer"

    _, tokenizer, _, run_config = load_trained_model(
        run.path, sentencepiece_model="", tokenizer_factory=factory
    )
    assert tokenizer == "tokenizer" and calls == [(run.path, run_config, "")]
    assert json.loads(open(run.config_path).read()) == run_config
