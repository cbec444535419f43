"""The plan of a distillation: its chunks, and plan.json agreed on, resumed or refused."""

import json

import pytest

from convs2s_tf.decoding import SearchConfig
from convs2s_tf.distillation import DistillationError, DistillationPlan
from convs2s_tf.distillation.plan import (
    agree_on_plan,
    plan_path,
    read_plan,
    search_settings,
)


def _plan(chunk_size=4, lines=10, **search):
    return DistillationPlan(
        teacher={"model_dirs": ["/runs/a"], "checkpoints": ["/runs/a/best/ckpt-1"]},
        search=search_settings(SearchConfig(beam_size=2, **search), None),
        chunk_size=chunk_size,
        source={"file": "/data/train.en", "lines": lines, "sha256": "ab" * 32},
    )


def test_chunks_cover_every_line_once():
    plan = _plan(chunk_size=4, lines=10)
    assert plan.num_chunks == 3
    lines = [line for index in range(plan.num_chunks) for line in plan.chunk_lines(index)]
    assert lines == list(range(10))
    assert _plan(chunk_size=5, lines=10).num_chunks == 2
    with pytest.raises(IndexError):
        plan.chunk_lines(3)
    with pytest.raises(ValueError, match="`chunk_size` must be >= 1"):
        _plan(chunk_size=0)


def test_search_settings_keep_what_changes_a_translation():
    settings = search_settings(SearchConfig(beam_size=3, nbest=2, parts=4), "cd" * 32)
    assert settings["beam_size"] == 3 and settings["shortlist"] == "cd" * 32
    assert "parts" not in settings and "nbest" not in settings
    # The search's parts do not change the plan: workers may use other core counts.
    assert _plan().difference(_plan(parts=7)) is None


def test_agree_on_plan_writes_resumes_and_refuses_naming_the_difference(tmp_path):
    work_dir = str(tmp_path / "work")
    assert agree_on_plan(work_dir, _plan()) is False
    assert read_plan(work_dir) == _plan()
    assert agree_on_plan(work_dir, _plan()) is True
    with pytest.raises(DistillationError, match="`chunk_size=4` there, `chunk_size=5` now"):
        agree_on_plan(work_dir, _plan(chunk_size=5))
    with pytest.raises(DistillationError, match="`max_len_b=200` there, `max_len_b=5` now"):
        agree_on_plan(work_dir, _plan(max_len_b=5))
    other_teacher = DistillationPlan(
        {**_plan().teacher, "model_dirs": ["/runs/b"]}, _plan().search, 4, _plan().source
    )
    with pytest.raises(DistillationError, match="teacher runs /runs/a there, /runs/b now"):
        agree_on_plan(work_dir, other_teacher)
    with pytest.raises(DistillationError, match="a training source of 10 lines"):
        agree_on_plan(work_dir, _plan(lines=11))
    # Refused runs leave the plan as it was.
    assert read_plan(work_dir) == _plan()


def test_an_unreadable_plan_is_refused(tmp_path):
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    (work_dir / "plan.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(DistillationError, match="is not a distillation plan"):
        read_plan(str(work_dir))
    assert json.loads(json.dumps(_plan().to_json())) == _plan().to_json()
    assert plan_path(str(work_dir)).endswith("work/plan.json")
