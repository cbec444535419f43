"""benchmarks.compare.ctranslate2 end to end with the smallest settings: a tiny teacher
trained for two steps on the short corpus, its distilled data, a student of a student's
shape (no pilot), fairseq Transformers trained for one epoch on both data and converted by
CTranslate2, every translator timed; each stage's output checked, not the figures, and a
second run finding every stage done."""

import json

import pytest
from absl import flags
from helpers.corpora import TINY_MODEL_FLAGS, local_corpus_flags

from benchmarks.compare import ctranslate2
from benchmarks.compare.distillation_stages import fastest_pilot, narrowest_beam

# The tiny runs' settings: two updates, no validation search, short hypotheses.
TINY_RUN = [
    *TINY_MODEL_FLAGS,
    "--max_steps=2",
    "--max_tokens=1000",
    "--valid_beam_size=0",
    "--test_beam_size=0",
    "--progress_bar=false",
    "--beam_size=2",
    "--max_len_a=1.2",
    "--max_len_b=5",
]


@pytest.mark.slow
@pytest.mark.usefixtures("forked_benchmark_children")
def test_compare_ctranslate2(short_corpus, tmp_path, capsys):
    teacher_config, student_config = tmp_path / "teacher.cfg", tmp_path / "student.cfg"
    data = [f"--data_dir={tmp_path / 'data'}", *local_corpus_flags(short_corpus)]
    teacher_config.write_text("\n".join([*data, *TINY_RUN]) + "\n")
    # A student's shape at test size: four encoder blocks, one narrow decoder block of 5 taps.
    student = ["--encoder_layers=[(16, 3)] * 4", "--decoder_layers=[(8, 5)]", "--seed=3"]
    student_config.write_text("\n".join([f"--flagfile={teacher_config}", *student]) + "\n")
    work_dir = tmp_path / "work"
    arguments = [
        "benchmark",
        f"--work_dir={work_dir}",
        f"--teacher_config={teacher_config}",
        f"--student_config={student_config}",
        "--teacher_seeds=1",
        "--teacher_exports=teacher",
        # No pilot: a pilot is a student's stages (trained, searched, exported, timed) run
        # once more, 17 of the test's 130 s; the choice among pilots is tested below.
        "--pilots=",
        # One beam to choose from (the choice itself: test_the_choices_take_the_fastest...).
        "--beams=5",
        # The Transformers: one epoch, however slow the machine (a time limit alone could
        # end before the first epoch's checkpoint on a busy one); the ConvS2S runs stop at
        # their two steps.
        "--train_minutes=10",
        "--max_epochs=1",
        "--sentences=8",
        "--latency_sentences=2",
        "--batch_size=4",
        # PyTorch's threads wait for each other when other processes take the cores.
        "--threads=1",
        # Without the compiled small-batch buckets (tests/test_export.py tests them).
        "--export_flags=--noxla_small_batches",
    ]
    for attempt in range(2):
        options = flags.FlagValues()
        ctranslate2.define_flags(options)
        options(arguments)
        ctranslate2.run(options)
        stdout = capsys.readouterr().out
        if attempt == 0:
            first = stdout
    line = json.loads(stdout.strip().splitlines()[-1])
    assert "training" in first and "distilling" in first
    assert "training" not in stdout and "distilling" not in stdout  # every stage was done
    assert (work_dir / "distilled" / "distillation" / "data.cfg").is_file()
    assert set(line["searches"]) == {"student"} and line["searches"]["student"]["beam"] == 5
    assert line["pilots"] == {} and line["preset"] == "config"
    beam = line["searches"]["student"]["beam"]
    # The students' rows with the default --student_flags (a shortlist), and without.
    rows = {"teacher_beam5", "student_shortlist_beam5", "student_int8_shortlist_beam5"}
    rows.add("student_beam5")
    for name in ("transformer", "transformer_student"):
        assert line["transformers"][name]["epochs"] == 1
        rows |= {f"{name}_ct2_{q}_{s}" for q in ("float32", "int8") for s in ("beam5", "greedy")}
    assert set(line["translators"]) == rows
    for figures in line["translators"].values():
        assert figures["batch1_mean_ms"] > 0 and figures["batch_sentences_per_sec"] > 0
        assert figures["peak_rss_mb"] > 0 and figures["size_mb"] > 0
        assert 0 <= figures["bleu"] <= 100
    translations = work_dir / "translations" / f"student_shortlist_beam{beam}.txt"
    assert len(translations.read_text().splitlines()) == 8
    goals = line["goals"]
    assert goals["student"] == f"student_shortlist_beam{beam}"
    assert goals["peak_rss_to_import_only"] > 0
    assert goals["int8"]["student"] == f"student_int8_shortlist_beam{beam}"
    assert (work_dir / "student" / "search_shortlist.json").is_file()
    assert goals["transformer"]["against"] == "transformer_ct2_float32_beam5"
    assert "| transformer_student_ct2_int8_greedy |" in stdout and line["cpu"] in stdout


def test_the_choices_take_the_fastest_within_the_tolerance():
    assert narrowest_beam({"1": 30.0, "2": 30.25, "5": 30.3}, 0.3) == 1
    assert narrowest_beam({"1": 29.9, "2": 30.1, "5": 30.3}, 0.3) == 2
    assert narrowest_beam({"5": 30.0}, 0.3) == 5
    pilots = {
        "d1": {"bleu": 37.8, "batch1_mean_ms": 4.0},
        "d2": {"bleu": 38.2, "batch1_mean_ms": 6.0},
        "wide": {"bleu": 38.3, "batch1_mean_ms": 5.0},
    }
    assert fastest_pilot(pilots, 0.3) == "wide"
    assert fastest_pilot(pilots, 0.5) == "d1"
