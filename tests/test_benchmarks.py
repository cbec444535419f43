"""The benchmarks users run (docs/performance.md), end to end in this process with the
smallest settings on the tiny fixtures (a random model over the small corpus): each ends
with one JSON line of sensible figures. The comparisons with fairseq and CTranslate2 have
test files of their own."""

import json
import shutil

import pytest
from absl import app, flags
from helpers.corpora import (
    TINY_MODEL_FLAGS,
    local_corpus_flags,
    write_multi30k_split,
)

from benchmarks import data_scale, family_comparison, shortlist_sizes, train_speed, translate_speed

# Sentences of the validation and test splits the decoding benchmarks translate.
SENTENCES = 8


def run_benchmark(module, capsys, *arguments):
    """Runs `module`'s benchmark in this process with fresh flags; its last JSON line."""
    options = flags.FlagValues()
    module.define_flags(options)
    options(["benchmark", *arguments])
    capsys.readouterr()
    module.run(options)
    output = capsys.readouterr().out
    return json.loads(output.strip().splitlines()[-1]), output


@pytest.fixture(scope="module")
def short_run(tiny_run, tmp_path_factory):
    """`tiny_run` over a copy of its prepared data whose validation and test splits hold
    the first SENTENCES pairs: the decoding benchmarks translate whole splits."""
    root = tmp_path_factory.mktemp("short_run")
    run_config = json.loads((tiny_run / "config.json").read_text())
    data_dir = root / "data"
    shutil.copytree(run_config["data_dir"], data_dir)
    for split in ("validation", "test"):
        for language in ("en", "de"):
            path = data_dir / f"{split}.{language}"
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            path.write_text("".join(lines[:SENTENCES]), encoding="utf-8")
    model_dir = root / "run"
    shutil.copytree(tiny_run, model_dir)
    run_config["data_dir"] = str(data_dir)
    (model_dir / "config.json").write_text(json.dumps(run_config))
    return model_dir


def _tiny_config(short_corpus, tmp_path):
    """A config as configs/multi30k_en_de.cfg is, over the small corpus and a tiny model."""
    config = tmp_path / "tiny.cfg"
    lines = [f"--data_dir={tmp_path / 'data'}", *local_corpus_flags(short_corpus)]
    config.write_text("\n".join([*lines, *TINY_MODEL_FLAGS]) + "\n")
    return config


@pytest.mark.slow
@pytest.mark.usefixtures("forked_benchmark_children")
def test_train_speed(short_corpus, tmp_path, capsys):
    config = _tiny_config(short_corpus, tmp_path)
    arguments = [f"--config={config}", "--preset=config", "--variants=float32", "--steps=2"]
    line, output = run_benchmark(train_speed, capsys, *arguments)
    assert line["target_tokens_per_sec"] == line["target_tokens_per_sec_float32"] > 0
    assert (line["preset"], line["steps"]) == ("config", 2)
    assert "config float32: " in output and "2 steps in" in output


@pytest.mark.slow
@pytest.mark.usefixtures("forked_benchmark_children")
def test_translate_speed(short_run, capsys):
    # Its `exports` part runs in test_family_comparison (benchmarks.family_comparison
    # times an arm's export through it); tests/test_export.py compares exports with
    # the checkpoint's translations.
    line, _ = run_benchmark(
        translate_speed,
        capsys,
        f"--model_dir={short_run}",
        "--parts=in_process,server",
        "--variants=float32",
        "--latency_sentences=2",
        "--batch_size=4",
        # Three clients against one search and one queued place: some are refused.
        "--clients=3",
        "--seconds=4",
        "--sizes=1,4",
        "--server_flags=--max_concurrent_requests=1,--max_queued_requests=1",
    )
    assert (line["sentences"], line["latency_sentences"], line["batch_size"]) == (SENTENCES, 2, 4)
    in_process = line["in_process"]
    assert in_process["float32_sentences_per_sec_beam5"] > 0
    assert in_process["float32_sentences_per_sec_greedy"] > 0
    assert in_process["float32_latency_ms_batch1"] > 0
    assert 0 <= in_process["float32_bleu_beam5"] <= 100 and "exports" not in line
    server = line["server"]
    # At the limit, nothing but RESOURCE_EXHAUSTED beside the answers.
    assert set(server["codes"]) <= {"OK", "RESOURCE_EXHAUSTED"} and server["codes"]["OK"] > 0
    assert 0 < server["p50_ms"] <= server["p99_ms"] and server["answered_sentences_per_sec"] > 0
    assert server["rss_mb"][0] > 0 and server["p99_to_queue_times_median"] > 0


def test_translate_speed_refuses_unknown_exports(short_run, capsys):
    with pytest.raises(Exception, match="Unknown --exports"):
        run_benchmark(translate_speed, capsys, f"--model_dir={short_run}", "--exports=fast")


@pytest.mark.slow
@pytest.mark.usefixtures("forked_benchmark_children")
def test_shortlist_sizes(short_run, capsys):
    line, _ = run_benchmark(
        shortlist_sizes,
        capsys,
        f"--model_dir={short_run}",
        "--sizes=2:4",
        "--latency_sentences=2",
        "--batch_size=64",
    )
    assert line["vocab_size"] == 500 and line["cpu"]
    whole, limited = line["rows"]
    assert whole["k"] is None and (limited["k"], limited["n"]) == (2, 4)
    for row in (whole, limited):
        assert 0 <= row["valid_bleu"] <= 100 and 0 <= row["test_bleu"] <= 100
        assert row["batch1_ms"] > 0 and row["batch_sentences_per_second"] > 0
    assert 0 < limited["set_size_batch1"] <= limited["set_size_batch"] <= 500


@pytest.mark.slow
def test_data_scale(short_corpus, tmp_path, capsys):
    # The start-up runs train the tiny model on their corpora.
    config = _tiny_config(short_corpus, tmp_path)
    line, _ = run_benchmark(
        data_scale,
        capsys,
        "--pairs=3000,6000",
        "--startup_pairs=3000",
        "--large_pairs=0",
        f"--config={config}",
        f"--work_dir={tmp_path / 'work'}",
    )
    assert set(line["prepare"]) == {"3000", "6000"} and set(line["startup"]) == {"3000"}
    for figures in line["prepare"].values():
        assert figures["seconds"] > 0 and figures["peak_rss_gb"] > 0 and figures["disk_mb"] > 0
    assert line["prepare"]["6000"]["disk_mb"] > line["prepare"]["3000"]["disk_mb"]
    assert line["startup"]["3000"]["seconds_to_exit"] > 0 and "input_pipeline" not in line


@pytest.mark.slow
@pytest.mark.usefixtures("forked_benchmark_children")
def test_family_comparison(short_corpus, tmp_path, capsys):
    # One arm (every arm, of either family, takes the same path; PoseNet's pipelines are
    # tested in tests/test_posenet_pipelines.py): a tiny ConvS2S trained on the short
    # corpus, scored and timed on SENTENCES validation and test pairs.
    corpus = {"train": short_corpus["train"]}
    for split, stem in (("validation", "val"), ("test", "test_2016_flickr")):
        corpus[split] = str(tmp_path / split)
        write_multi30k_split(corpus[split], stem, SENTENCES)
    config = tmp_path / "tiny.cfg"
    config.write_text(
        "\n".join(
            [
                f"--data_dir={tmp_path / 'data'}",
                *local_corpus_flags(corpus),
                *TINY_MODEL_FLAGS,
                "--max_epochs=2",
                "--max_tokens=1000",
                "--valid_beam_size=0",
                "--test_beam_size=0",
                "--progress_bar=false",
                "--max_len_a=1.2",
                "--max_len_b=5",
            ]
        )
        + "\n"
    )
    arguments = [
        "--seed=3",
        f"--arms=tiny:{config}",
        f"--runs_dir={tmp_path / 'runs'}",
        # A budget for every arm (the epoch ends the run first).
        "--train_minutes=10",
        # After the flagfile's: one epoch of its two.
        "--train_flags=--max_epochs=1,--training_dtype=float32",
        "--latency_sentences=2",
        "--batch_size=64",
        # One round of timing (each is a fresh export and process).
        "--speed_rounds=1",
        # The buckets are tested with the export (tests/test_export.py); here their
        # compilation would only lengthen the arm's export and its load.
        "--nobuckets",
    ]
    line, _ = run_benchmark(family_comparison, capsys, *arguments)
    arm = line["arms"]["tiny"]
    assert line["seed"] == 3 and arm["epochs"] == 1 and arm["updates"] > 0
    assert arm["parameters"] > 0 and arm["train_seconds"] > 0 and arm["train_tokens_per_sec"] > 0
    for key in ("bleu", "chrf", "approx_bleu", "approx_bleu_unpadded"):
        assert 0 <= arm[key] <= 100
    assert arm["batch1_ms"] > 0 and arm["batch64_sentences_per_sec"] > 0
    assert arm["speed_rounds"] == [
        {key: arm[key] for key in ("batch1_ms", "batch64_sentences_per_sec")}
    ]
    assert (tmp_path / "runs" / "tiny_seed3.speed1.json").is_file()
    # Killed after its training, before its stage was written: the re-run starts the
    # training again, which finds its run at its end; the log keeps both processes' lines.
    for stage in ("train.json", "json"):
        (tmp_path / "runs" / f"tiny_seed3.{stage}").unlink()
    again, _ = run_benchmark(family_comparison, capsys, *arguments)
    log = (tmp_path / "runs" / "tiny_seed3.log").read_text()
    assert log.count("# started: python -m pipelines.train") == 2
    resumed = again["arms"]["tiny"]
    assert (resumed["updates"], resumed["epochs"]) == (arm["updates"], arm["epochs"])
    assert resumed["train_seconds"] == arm["train_seconds"]
    # A run trained by other arguments is neither continued nor reused.
    other_budget = [a.replace("--train_minutes=10", "--train_minutes=11") for a in arguments]
    with pytest.raises(
        app.UsageError, match="tiny_seed3.log was trained by .*--max_train_minutes=10"
    ):
        run_benchmark(family_comparison, capsys, *other_budget)
    # Another CPU's stages are refused.
    (tmp_path / "runs" / "seed3.machine.json").write_text('{"cpu": "another CPU"}')
    with pytest.raises(app.UsageError, match="measured on another CPU; this machine is"):
        run_benchmark(family_comparison, capsys, *arguments)
