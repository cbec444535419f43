"""Data flags, the Multi30k flagfile, and `python -m pipelines.prepare_data` end to end."""

import json
import os
import subprocess
import sys

import pytest
from absl import flags

from convs2s_tf.data.cleaning import CleaningConfig
from convs2s_tf.data.prepare import PrepareConfig
from pipelines import flags as pipeline_flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO_ROOT, "configs", "multi30k_en_de.cfg")


def parsed(*arguments):
    flag_values = flags.FlagValues()
    pipeline_flags.define_all_flags(flag_values)
    pipeline_flags.define_all_flags(flag_values)  # a second call is a no-op
    flag_values(["prog", *arguments])
    return flag_values


def test_every_flag_has_help_and_the_config_comments_and_sets_them():
    flag_values = parsed()
    names = [name for name in flag_values if len(name) > 1 and name not in ("help", "helpfull")]
    for name in names:
        assert flag_values[name].help and len(flag_values[name].help) > 15, name
    config_lines = open(CONFIG, encoding="utf-8").read().splitlines()
    for index, line in enumerate(config_lines):
        if line.startswith("--"):
            assert line[2:].split("=")[0] in flag_values, line
            previous = [other for other in config_lines[:index] if other.strip()][-1]
            assert previous.startswith("#") or previous.startswith("--"), line


def test_flagfile_to_library_arguments():
    flag_values = parsed(f"--flagfile={CONFIG}")
    config = pipeline_flags.prepare_config_from_flags(flag_values)
    assert (config.data_dir, config.dataset, config.source_lang, config.target_lang) == (
        "data/multi30k_en_de",
        "multi30k",
        "en",
        "de",
    )
    assert config.vocab_size == 8000
    assert config.cleaning == CleaningConfig(max_words=175, max_length_ratio=1.5)
    assert config.resolved_tfds_data_dir == "data/multi30k_en_de/tfds"
    kwargs = pipeline_flags.training_dataset_kwargs(flag_values, seed=5)
    assert kwargs == {
        "max_tokens": 4000,
        "max_sentences": None,
        "max_source_positions": 1024,
        "max_target_positions": 1024,
        "shuffle_buffer_size": None,
        "seed": 5,
    }


def test_prepare_config_flags_read_back_as_the_same_config(tmp_path):
    config = PrepareConfig(
        data_dir=str(tmp_path / "data"),
        dataset="local",
        source_lang="de",
        target_lang="en",
        split_prefixes={"train": "/c/train", "validation": "/c/valid"},
        cleaning=CleaningConfig(max_words=80, max_length_ratio=0),
        num_shards=3,
        sentencepiece_model="/teacher/sentencepiece.model",
    )
    # After a flagfile that names a test split, the empty --test_prefix removes it.
    flagfile = tmp_path / "data.cfg"
    flagfile.write_text("\n".join(pipeline_flags.prepare_config_flags(config)) + "\n")
    flag_values = parsed(f"--flagfile={CONFIG}", "--test_prefix=/c/test", f"--flagfile={flagfile}")
    assert pipeline_flags.prepare_config_from_flags(flag_values) == config
    assert pipeline_flags.prepare_config_from_flags(parsed(f"--flagfile={CONFIG}")) == (
        PrepareConfig(data_dir="data/multi30k_en_de")
    )


def test_local_prefixes_need_the_local_dataset():
    with pytest.raises(flags.ValidationError, match="dataset=local"):
        pipeline_flags.prepare_config_from_flags(parsed("--data_dir=/tmp/x", "--train_prefix=/c/t"))
    # And the local dataset needs its training prefix: a one-line usage error, not a
    # traceback from the library.
    with pytest.raises(flags.ValidationError, match="--train_prefix"):
        pipeline_flags.prepare_config_from_flags(parsed("--data_dir=/tmp/x", "--dataset=local"))


def run_prepare(*arguments):
    return subprocess.run(
        [sys.executable, "-m", "pipelines.prepare_data", *arguments],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow  # over ten seconds on 2 cores
def test_prepare_data_cli_end_to_end(small_corpus, tmp_path):
    data_dir = tmp_path / "data"
    arguments = [
        f"--flagfile={CONFIG}",
        f"--data_dir={data_dir}",
        "--dataset=local",
        f"--train_prefix={small_corpus['train']}",
        f"--valid_prefix={small_corpus['validation']}",
        f"--test_prefix={small_corpus['test']}",
        "--vocab_size=500",
    ]
    first = run_prepare(*arguments)
    assert first.returncode == 0, first.stderr
    assert "prepared" in first.stdout and "train:" in first.stdout
    # The data directory points at the version folder holding the files.
    version = data_dir / json.loads((data_dir / "fingerprint.json").read_text())["prepared"]
    summary = json.load(open(version / "summary.json", encoding="utf-8"))
    assert summary["vocab_size"] == 500 and summary["dataset"] == "local"
    assert summary["splits"]["train"]["pairs_read"] == 2000
    for name in ("sentencepiece.model", "sentencepiece.vocab", "train.en", "test.de"):
        assert (version / name).is_file()

    second = run_prepare(*arguments)
    assert second.returncode == 0 and "up to date, nothing done" in second.stdout

    missing = run_prepare(*arguments[:-1], f"--test_prefix={tmp_path}/absent", "--vocab_size=400")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert f"{tmp_path}/absent.en" in missing.stderr


CONFIG_NAMES = sorted(name[:-4] for name in os.listdir(os.path.join(REPO_ROOT, "configs")))


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_every_config_parses_with_every_pipeline_flag(name, monkeypatch):
    from convs2s_tf.models import get_family

    # Flagfiles name paths relative to the repository root, as in the README.
    monkeypatch.chdir(REPO_ROOT)
    flag_values = parsed(f"--flagfile=configs/{name}.cfg")
    assert flag_values.model_dir.startswith("runs/")
    assert flag_values.preset in get_family(flag_values.family).list_presets()
    if name.startswith("wmt"):
        assert flag_values.vocab_size == 40000
        assert flag_values.dataset.startswith("wmt1")
