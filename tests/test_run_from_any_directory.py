"""A run directory answers for itself: every pipeline that takes --model_dir finds the
run's prepared data and SentencePiece model through the run's `config.json`, whatever the
working directory, with no --data_dir or --flagfile.

The run used here is the strictest case: a copy of the tiny run whose `config.json` names
its data and SentencePiece model relative to the run directory, read from another
directory through a relative --model_dir.
"""

import importlib.util
import json
import os
import shutil

import pytest
from conftest import SEARCH_FLAGS, run_python


@pytest.fixture(scope="module")
def relocated(tiny_run, tmp_path_factory):
    """(working directory, --model_dir relative to it) of a copy of the tiny run whose
    paths are relative to the run directory."""
    root = tmp_path_factory.mktemp("relocated")
    model_dir = root / "runs" / "tiny"
    shutil.copytree(tiny_run, model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    for key in ("data_dir", "sentencepiece_model"):
        config[key] = os.path.relpath(config[key], model_dir)
    (model_dir / "config.json").write_text(json.dumps(config))
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    return elsewhere, os.path.join("..", "runs", "tiny")


def _run(fork_server, cwd, *arguments, stdin=None):
    return run_python(["-m", *arguments], stdin=stdin, cwd=cwd, fork_server=fork_server)


@pytest.mark.slow  # pipelines in subprocesses from another directory
def test_evaluate_scores_the_runs_own_split(relocated, fork_server):
    cwd, model_dir = relocated
    result = _run(
        fork_server,
        cwd,
        "pipelines.evaluate",
        f"--model_dir={model_dir}",
        "--split=test",
        "--json",
        *SEARCH_FLAGS,
    )
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert 0 <= scores["bleu"] <= 100 and "nrefs:1" in scores["bleu_signature"]


@pytest.mark.slow  # pipelines in subprocesses from another directory
def test_translate_export_shortlist_and_averaging_find_the_run(relocated, fork_server):
    cwd, model_dir = relocated
    translated = _run(
        fork_server,
        cwd,
        "pipelines.translate",
        f"--model_dir={model_dir}",
        *SEARCH_FLAGS,
        stdin="A dog runs.\nTwo men talk.\n",
    )
    assert len(translated.stdout.splitlines()) == 2
    exported = _run(
        fork_server,
        cwd,
        "pipelines.export",
        f"--model_dir={model_dir}",
        "--export_dir=exports/tiny",
        "--noxla_small_batches",
        *SEARCH_FLAGS,
    )
    assert os.path.isfile(cwd / "exports" / "tiny" / "1" / "saved_model.pb")
    assert "exports/tiny/1" in exported.stdout
    _run(fork_server, cwd, "pipelines.build_shortlist", f"--model_dir={model_dir}")
    assert os.path.isfile(os.path.join(cwd, model_dir, "shortlist.npz"))
    _run(
        fork_server,
        cwd,
        "pipelines.average_checkpoints",
        f"--model_dir={model_dir}",
        "--last=1",
        "--output_dir=averaged",
    )
    # The averaged run is written elsewhere, so its config names the data absolutely.
    averaged = json.loads((cwd / "averaged" / "config.json").read_text())
    assert os.path.isabs(averaged["data_dir"]) and os.path.isdir(averaged["data_dir"])


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None and os.environ.get("CI") != "true",
    reason="pipelines.export_fairseq needs PyTorch (the parity extra)",
)
@pytest.mark.slow  # pipelines in subprocesses from another directory
def test_export_fairseq_reads_the_runs_languages(relocated, fork_server):
    cwd, model_dir = relocated
    _run(
        fork_server,
        cwd,
        "pipelines.export_fairseq",
        f"--model_dir={model_dir}",
        "--output_dir=fairseq",
    )
    # The tiny data is English-German: the dictionaries are named after its languages.
    assert sorted(os.listdir(cwd / "fairseq")) == [
        "checkpoint_best.pt",
        "dict.de.txt",
        "dict.en.txt",
        "sentencepiece.model",
    ]
