"""pipelines.distill: a teacher's translations of its training source prepared as new
data, shared by two workers, resumed, and its users' mistakes reported in one line.

The teacher is `tiny_run`'s model, its config pointed at 60 training pairs prepared by
pipelines.prepare_data with its SentencePiece model (--existing_sentencepiece_model).
"""

import json
import shutil

import pytest
from helpers.corpora import TINY_MODEL_FLAGS, local_corpus_flags, write_local_corpus
from helpers.in_process import run_in_process

from convs2s_tf.data.data_directory import PreparedData
from convs2s_tf.data.sources import file_sha256
from convs2s_tf.data.text_files import read_lines

# A short search (the suite's SEARCH_FLAGS, with a narrower beam).
SEARCH = ["--beam_size=2", "--max_len_a=1.2", "--max_len_b=5"]


def _run(*arguments):
    return run_in_process(["-m", "pipelines.distill", *arguments], check=False)


def _one_line_error(result):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("distill: error: "), result.stderr[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def teacher(tiny_run, small_prepared, tmp_path_factory):
    """(run directory, data directory) of a teacher trained, as its config says, on 60
    pairs tokenised with `tiny_run`'s vocabulary."""
    root = tmp_path_factory.mktemp("distill_teacher")
    prefixes = write_local_corpus(root / "corpus", 60, 8, 8)
    data_dir = root / "data"
    run_in_process(
        [
            "-m",
            "pipelines.prepare_data",
            f"--data_dir={data_dir}",
            *local_corpus_flags(prefixes),
            f"--existing_sentencepiece_model={small_prepared.data.sentencepiece_model_path}",
            "--max_length_ratio=0",
            "--num_shards=2",
            "--workers=1",
        ]
    )
    run = root / "run"
    shutil.copytree(tiny_run, run)
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "data_dir": str(data_dir)}))
    return run, data_dir


@pytest.fixture(scope="module")
def distilled(teacher, tmp_path_factory):
    """(output data directory, the two workers' results, the flags they shared)."""
    run, _ = teacher
    output = tmp_path_factory.mktemp("distilled") / "data"
    common = [f"--model_dir={run}", f"--output_data_dir={output}", "--chunk_size=16", *SEARCH]
    # Batches beyond the compiled buckets (of up to 8 sentences): graph mode, no XLA compile.
    workers = ["--num_workers=2", "--batch_size=16", "--workers=1"]
    first = _run(*common, *workers, "--worker_index=0")
    second = _run(*common, *workers, "--worker_index=1", "--keep_original_targets")
    return output, (first, second), common


def test_two_workers_distil_and_prepare_the_teachers_translations(teacher, distilled):
    _, data_dir = teacher
    output, (first, second), common = distilled
    assert first.returncode == 0, first.stderr[-3000:]
    assert "2 of 4 chunk(s) of 16 lines written, 2 by this worker" in first.stdout
    assert "2 chunk(s) of other workers remain" in first.stdout
    assert second.returncode == 0, second.stderr[-3000:]
    assert "4 of 4 chunk(s) of 16 lines written, 2 by this worker (resumed)" in second.stdout
    flagfile = output / "distillation" / "data.cfg"
    assert f"python -m pipelines.train ... --flagfile={flagfile}" in second.stdout
    distilled_data, teacher_data = PreparedData.load(str(output)), PreparedData.load(str(data_dir))
    assert file_sha256(distilled_data.sentencepiece_model_path) == file_sha256(
        teacher_data.sentencepiece_model_path
    )
    sources = read_lines(teacher_data.split_paths("train")[0])
    originals = read_lines(teacher_data.split_paths("train")[1])
    distilled_sources, targets = (read_lines(path) for path in distilled_data.split_paths("train"))
    # The original pairs first, then every source line with the teacher's translation
    # (a pair whose translation is empty is dropped by the teacher data's cleaning).
    assert distilled_sources[:60] == sources and targets[:60] == originals
    assert set(distilled_sources[60:]) <= set(sources) and len(distilled_sources) > 60
    for split in ("validation", "test"):
        assert read_lines(distilled_data.split_paths(split)[0]) == read_lines(
            teacher_data.split_paths(split)[0]
        )
    # The flagfile describes the preparation: with it the data is up to date.
    again = run_in_process(["-m", "pipelines.prepare_data", f"--flagfile={flagfile}"])
    assert "up to date, nothing done" in again.stdout
    # Run again with another search: refused, naming the difference.
    other = _run(*common[:-3], "--beam_size=3", *SEARCH[1:])
    assert "--beam_size=2 there, --beam_size=3 now" in _one_line_error(other)


@pytest.mark.slow  # trains a student (a few steps), which takes more than ten seconds
def test_a_student_trains_on_the_distilled_data_as_it_is(distilled, tmp_path):
    output, _, _ = distilled
    student = run_in_process(
        [
            "-m",
            "pipelines.train",
            f"--flagfile={output / 'distillation' / 'data.cfg'}",
            f"--model_dir={tmp_path / 'student'}",
            *TINY_MODEL_FLAGS,
            "--max_steps=2",
            "--max_tokens=600",
            "--valid_beam_size=0",
            "--test_beam_size=0",
            "--progress_bar=false",
        ]
    )
    assert f"Prepared {output}" not in student.stdout  # found up to date, as it is
    run_config = json.loads((tmp_path / "student" / "config.json").read_text())
    assert run_config["data_fingerprint"] == PreparedData.load(str(output)).summary["fingerprint"]


def test_user_errors_are_one_line(teacher, tmp_path):
    run, data_dir = teacher
    same = _one_line_error(_run(f"--model_dir={run}", f"--output_data_dir={data_dir}", *SEARCH))
    assert "is the teacher's prepared data" in same and "--output_data_dir" in same
    missing = _one_line_error(
        _run(f"--model_dir={tmp_path / 'nope'}", f"--output_data_dir={tmp_path / 'out'}")
    )
    assert f"{tmp_path / 'nope'}/config.json does not exist" in missing
    assert "--output_data_dir" in _one_line_error(_run(f"--model_dir={run}"))
    workers = _one_line_error(
        _run(f"--model_dir={run}", f"--output_data_dir={tmp_path}", "--worker_index=2")
    )
    assert "--worker_index=2 must be between 0 and --num_workers - 1 (0)" in workers
