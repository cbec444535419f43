"""Shared fixtures and helpers for the test suite."""

import json
import os
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


def randomize_weights(model, seed=0, scale=0.3):
    """Gives every float variable random values (biases and gains included).

    At construction biases are zero and gains equal the norms, which can hide a missing
    mask or a wrong residual; tests of structural rules run on random weights instead.
    """
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if variable.dtype not in ("float32", "float64") or not variable.trainable:
            continue
        values = rng.normal(0.0, scale, size=variable.shape).astype(variable.dtype)
        if variable.path.endswith("kernel_g"):
            values = np.abs(values) + 0.5
        variable.assign(values)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(0)
    yield


# ---- Data tests (tests/test_data_*.py) ----

MULTI30K_RAW_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "convs2s_tf",
    "datasets",
    "multi30k",
    "raw",
)


def multi30k_lines(stem, language, count):
    """Returns the first `count` lines of an embedded Multi30k file (e.g. "train", "en")."""
    import gzip

    with gzip.open(
        os.path.join(MULTI30K_RAW_DIR, f"{stem}.{language}.gz"), "rt", encoding="utf-8"
    ) as f:
        return [next(f).rstrip("\n") for _ in range(count)]


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory):
    """A local en-de corpus from real Multi30k lines: 2,000 training pairs (gzip),
    200 validation and 200 test pairs (plain). Returns {split: prefix}."""
    import gzip

    root = tmp_path_factory.mktemp("small_corpus")
    sizes = {
        "train": ("train", 2000),
        "validation": ("val", 200),
        "test": ("test_2016_flickr", 200),
    }
    prefixes = {}
    for split, (stem, count) in sizes.items():
        prefix = str(root / split)
        for language in ("en", "de"):
            text = "".join(line + "\n" for line in multi30k_lines(stem, language, count))
            if split == "train":
                with gzip.open(f"{prefix}.{language}.gz", "wt", encoding="utf-8") as f:
                    f.write(text)
            else:
                with open(f"{prefix}.{language}", "w", encoding="utf-8") as f:
                    f.write(text)
        prefixes[split] = prefix
    return prefixes


@pytest.fixture(scope="session")
def small_prepared(small_corpus, tmp_path_factory):
    """`small_corpus` prepared with a 500-piece BPE model (a PrepareResult)."""
    from convs2s_tf.data.prepare import PrepareConfig, prepare_data

    config = PrepareConfig(
        data_dir=str(tmp_path_factory.mktemp("small_prepared")),
        dataset="local",
        source_lang="en",
        target_lang="de",
        split_prefixes=small_corpus,
        vocab_size=500,
    )
    return prepare_data(config)


@pytest.fixture
def no_network(monkeypatch):
    """Makes any attempt to open a network connection fail the test at once."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[:1]}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Beam search of the small exported model used by the export and serving tests.
SEARCH_FLAGS = ["--beam_size=3", "--max_len_a=1.2", "--max_len_b=5"]


def subprocess_env(**extra):
    """Environment of pipeline subprocesses: the repository importable, TF quiet."""
    return dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", **extra)


def run_python(arguments, stdin=None, check=True, timeout=600):
    """Runs `python ARGUMENTS...` from the repository root with `subprocess_env()`;
    asserts it succeeded (printing the end of its stderr) unless `check` is False."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, *arguments],
        cwd=ROOT,
        env=subprocess_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="session")
def tiny_run(small_prepared, tmp_path_factory):
    """A run directory as pipelines.train writes it: config.json and a checkpoint of a
    small random model over the small corpus' 500-piece vocabulary."""
    import tensorflow as tf

    from convs2s_tf.models import ConvS2S

    model_dir = tmp_path_factory.mktemp("tiny_run")
    vocab_size = small_prepared.summary["vocab_size"]
    config = dict(
        source_vocab_size=vocab_size,
        target_vocab_size=vocab_size,
        embed_dim=16,
        encoder_layers="[(16, 3)] * 2",
        decoder_layers="[(16, 3)] * 2",
        decoder_out_embed_dim=16,
        max_source_positions=64,
        max_target_positions=64,
    )
    model = ConvS2S(**config)
    model(model.dummy_inputs())
    randomize_weights(model, seed=21, scale=0.5)
    checkpoint = tf.train.Checkpoint(model=model)
    checkpoint.save(str(model_dir / "checkpoints" / "ckpt"))
    run_config = {
        "model": ConvS2S(**config).get_config(),
        "sentencepiece_model": small_prepared.data.sentencepiece_model_path,
        "data_dir": os.path.dirname(small_prepared.data.sentencepiece_model_path),
    }
    for key in ("name", "trainable", "dtype"):
        run_config["model"].pop(key, None)
    (model_dir / "config.json").write_text(json.dumps(run_config))
    return model_dir


@pytest.fixture(scope="session")
def exported(tiny_run, tmp_path_factory):
    export_dir = tmp_path_factory.mktemp("saved_models") / "tiny"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.export",
            f"--model_dir={tiny_run}",
            f"--export_dir={export_dir}",
            *SEARCH_FLAGS,
        ],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{export_dir}/1" in result.stdout
    return export_dir
