"""End-to-end tests of `python -m pipelines.average_checkpoints` and of the averaged run
in translate, evaluate (with --output) and export."""

import json
import shutil

import pytest
import tensorflow as tf
from conftest import SEARCH_FLAGS
from helpers.in_process import run_in_process
from helpers.models import randomize_weights

from convs2s_tf.runs import RunDirectory, build_model


def _run_with_three_checkpoints(tiny_run, path):
    """A copy of `tiny_run` whose checkpoints/ holds three random models (steps 10-30)."""
    shutil.copy(RunDirectory(tiny_run).config_path, path / "config.json")
    run = RunDirectory(path)
    model = build_model(run.read_config()["model"])
    manager = run.checkpoint_manager(tf.train.Checkpoint(model=model), max_to_keep=3)
    for step in (10, 20, 30):
        randomize_weights(model, seed=step, scale=0.5)
        manager.save(checkpoint_number=step)
    return run


@pytest.mark.slow  # averages, then translates, evaluates and exports
def test_average_last_n_then_translate_evaluate_and_export(tiny_run, small_corpus, tmp_path):
    source = _run_with_three_checkpoints(tiny_run, tmp_path)
    output_dir = tmp_path / "averaged"
    result = run_in_process(
        [
            "-m",
            "pipelines.average_checkpoints",
            f"--model_dir={source.path}",
            "--last=2",
            f"--output_dir={output_dir}",
        ]
    )
    assert f"Averaged 2 checkpoints into {output_dir}/best/ckpt-" in result.stdout
    averaged_from = RunDirectory(output_dir).read_config()["averaged_from"]
    assert averaged_from == [
        f"{source.checkpoints_dir}/ckpt-20",
        f"{source.checkpoints_dir}/ckpt-30",
    ]

    # The averaged run serves every pipeline reading --model_dir.
    sources = [line for line in open(small_corpus["test"] + ".en")][:6]
    (tmp_path / "source.en").write_text("".join(sources))
    (tmp_path / "reference.de").write_text(
        "".join(open(small_corpus["test"] + ".de").readlines()[:6])
    )
    translated = run_in_process(
        ["-m", "pipelines.translate", f"--model_dir={output_dir}", *SEARCH_FLAGS],
        stdin="".join(sources),
    )
    hypotheses = tmp_path / "hypotheses.de"
    evaluated = run_in_process(
        [
            "-m",
            "pipelines.evaluate",
            f"--model_dir={output_dir}",
            f"--source={tmp_path / 'source.en'}",
            f"--reference={tmp_path / 'reference.de'}",
            f"--output={hypotheses}",
            "--json",
            *SEARCH_FLAGS,
        ]
    )
    scores = json.loads(evaluated.stdout.strip().splitlines()[-1])
    assert scores["sentences"] == 6
    # --output holds the hypotheses scored, one per line in corpus order: those of translate.
    assert hypotheses.read_text().splitlines() == translated.stdout.splitlines()
    exported = run_in_process(
        [
            "-m",
            "pipelines.export",
            f"--model_dir={output_dir}",
            f"--export_dir={tmp_path / 'export'}",
            *SEARCH_FLAGS,
        ]
    )
    assert f"{tmp_path / 'export'}/1" in exported.stdout


def test_too_many_or_mismatched_checkpoints_are_one_line_errors(tiny_run, tmp_path):
    source = _run_with_three_checkpoints(tiny_run, tmp_path)
    cases = {
        "--last=4": f"{source.checkpoints_dir} holds 3 checkpoints, fewer than the 4 asked for",
        f"--checkpoints={tmp_path}/missing/ckpt-1": "does not exist",
        "": "Give either --last=N or --checkpoints=A,B,...",
    }
    for flag, message in cases.items():
        arguments = [f"--model_dir={source.path}", f"--output_dir={tmp_path / 'out'}"]
        result = run_in_process(
            ["-m", "pipelines.average_checkpoints", *arguments] + ([flag] if flag else []),
            check=False,
        )
        assert result.returncode == 2, (flag, result.stderr[-2000:])
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("average_checkpoints: error: "), lines
        assert message in lines[0], (flag, lines)
