"""The benchmarks of docs/performance.md run end to end, as the page's commands do, with
the smallest settings on the tiny fixtures (a random model over the small corpus): each
exits 0 and ends with its JSON line. Their figures are not checked, only that they are
produced."""

import json
import os
import shutil

import pytest
from conftest import run_python
from helpers.corpora import (
    POSENET_TINY_FLAGS,
    TINY_MODEL_FLAGS,
    local_corpus_flags,
    write_multi30k_split,
)

from benchmarks import floor_share, train_profile

# End to end in fresh processes: `scripts/run_tests.sh --all` and CI run it.
pytestmark = pytest.mark.slow

# Sentences of the validation and test splits the decoding benchmarks translate.
SENTENCES = 8


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


def _last_json(arguments):
    result = run_python(arguments)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _tiny_config(short_corpus, tmp_path):
    """A config as configs/multi30k_en_de.cfg is, over the small corpus and a tiny model."""
    config = tmp_path / "tiny.cfg"
    config.write_text(
        "\n".join(
            [
                f"--data_dir={tmp_path / 'data'}",
                *local_corpus_flags(short_corpus),
                *TINY_MODEL_FLAGS,
            ]
        )
        + "\n"
    )
    return config


def test_train_throughput(short_corpus, tmp_path):
    config = _tiny_config(short_corpus, tmp_path)
    line = _last_json(
        [
            "-m",
            "benchmarks.train_throughput",
            f"--config={config}",
            "--preset=config",
            "--variants=float32",
            "--steps=2",
        ]
    )
    assert line["target_tokens_per_sec"] == line["target_tokens_per_sec_float32"] > 0
    assert (line["preset"], line["steps"]) == ("config", 2)


def test_train_profile(short_corpus, tmp_path):
    config = _tiny_config(short_corpus, tmp_path)
    line = _last_json(
        [
            "-m",
            "benchmarks.train_profile",
            f"--config={config}",
            "--preset=config",
            # One limited ISA (the profile runs at the default one): each is a training.
            "--isas=AVX512_CORE",
            "--dtypes=bfloat16",
            "--steps=3",
        ]
    )
    assert list(line["rates"]) == ["AVX512_CORE"] and line["rates"]["AVX512_CORE"]["bfloat16"] > 0
    profile = line["profiles"]["bfloat16"]
    assert profile["products"] > 0 and profile["casts"] > 0 and profile["step (wall)"] > 0
    # The parts and the idle time cannot exceed the step by more than the two cores' overlap.
    parts = sum(profile[name] for name in (*train_profile.CATEGORIES, "idle"))
    assert 0.5 * profile["step (wall)"] < parts < 2.0 * profile["step (wall)"]


def test_export_speed(short_run):
    line = _last_json(
        [
            "-m",
            "benchmarks.export_speed",
            f"--model_dir={short_run}",
            "--no_buckets",
            "--latency_sentences=2",
            "--batch_size=64",
        ]
    )
    assert line["buckets"] is False and line["sentences"] == SENTENCES
    for key in ("latency_load_seconds", "latency_batch1_mean_ms", "latency_first_request_ms"):
        assert line[key] > 0
    assert line["throughput_first_pass_sentences_per_sec"] > 0


def test_translate_startup(short_run):
    line = _last_json(
        [
            "-m",
            "benchmarks.translate_startup",
            f"--model_dir={short_run}",
            f"--source={short_run.parent / 'data' / 'test.en'}",
            "--repeats=1",
        ]
    )
    assert line["repeats"] == 1 and line["sentences"] == SENTENCES
    assert line["one_sentence_seconds"] > 0 and line["all_lines_seconds"] > 0
    assert set(line["breakdown"]) == {
        "import",
        "load",
        "translate_one_sentence",
        "translate_all_lines",
    }
    assert set(line["in_process"]) == {
        "import",
        "load",
        "first_translation",
        "second_translation",
        "all_lines",
    }


def test_decode_speed(short_run, exported):
    line = _last_json(
        [
            "-m",
            "benchmarks.decode_speed",
            f"--model_dir={short_run}",
            f"--saved_model={exported}",
            "--variants=float32",
            "--saved_model_variants=",
            "--batch_size=64",
            "--latency_sentences=2",
            "--recompute_sentences=2",
        ]
    )
    for key in (
        "float32_sentences_per_sec_greedy",
        "float32_sentences_per_sec_beam5",
        "float32_bleu_beam5",
        "float32_latency_ms_batch1",
        "incremental_speedup_beam5",
        "saved_model_given_latency_ms_batch1",
        "saved_model_given_bleu",
    ):
        assert key in line, key
    assert line["latency_ms_batch1_variant"] == "float32"


def test_step_profile(short_run):
    line = _last_json(
        [
            "-m",
            "benchmarks.step_profile",
            f"--model_dir={short_run}",
            "--latency_sentences=2",
            "--batch_size=4",
        ]
    )
    assert set(line) == {"export_batch1", "export_batch4", "in_process_batch1", "in_process_batch4"}
    for name, profile in line.items():
        assert profile["steps"] > 0 and profile["sentence_steps"] >= profile["steps"], name
        parts = profile["part_us_per_step"]
        # Every search multiplies by the weights and selects (the tiny model's cache
        # gathers can round to 0 us a step).
        for part in ("products", "selection"):
            assert parts[part] > 0, (name, part, parts)


def test_request_parts(short_run):
    line = _last_json(
        ["-m", "benchmarks.request_parts", f"--model_dir={short_run}", "--sentences=3"]
        + ["--rounds=1"]
    )
    assert len(line["rounds"]) == 1
    summary = line["summary"]
    request = summary["ms_per_request"]
    assert set(request) == {
        "call",
        "tokenization",
        "tokenization and encoder",
        "search loop",
        "request",
        "outside the loop",
    }
    assert all(request[part] > 0 for part in request if part != "outside the loop"), request
    assert request["outside the loop"] == pytest.approx(
        request["request"] - request["search loop"], abs=0.002
    )
    step = summary["ms_per_step"]
    assert set(step) == {
        "search loop",
        "decoder step alone",
        "decoder step and selection",
        "decoder step, minimal form",
        "floor products",
        "floor selection",
    }
    assert all(value > 0 for value in step.values()), step
    fit = summary["search_loop_fit_ms"]
    assert set(fit) == {"per step", "per call"}
    # No line when the sentences all take as many steps; with one, both parts.
    assert (fit["per step"] is None) == (fit["per call"] is None)
    assert summary["steps_per_sentence"] > 0
    assert 0 < summary["loop_fraction_of_request"] and summary["loop_step_share_of_floor"] > 0


def test_batch_step_parts(short_run):
    modes = ("graph", "XLA")
    line = _last_json(
        ["-m", "benchmarks.batch_step_parts", f"--model_dir={short_run}", "--sentences=3,1"]
        + ["--rounds=1", "--search_batch_size=3"]
    )
    assert set(line) == {"1", "3", "search"}
    search = line["search"]
    # The 8 test sentences in batches of 3, 2 and 3: every step of each batch counted.
    assert search["batch_size"] == 3 and search["steps"] >= 3 and len(search["rounds"]) == 1
    summary = search["summary"]
    assert all(summary[key] > 0 for key in summary), summary
    assert summary["floor_share_of_steps"] == pytest.approx(
        summary["floor_steps_seconds"] / summary["graph_steps_seconds"], abs=0.002
    )
    for count in ("1", "3"):
        summary = line[count]["summary"]
        assert len(line[count]["rounds"]) == 1
        assert set(summary["ms_per_step"]) == {
            f"{part}, {mode}" for part in ("decoder step", "step and selection") for mode in modes
        } | {"floor products", "floor selection"}
        assert all(value > 0 for value in summary["ms_per_step"].values()), summary
        assert min(summary["graph_share_of_floor"], summary["xla_share_of_floor"]) > 0
        assert summary["xla_speedup"] > 0


def test_batch_step_parts_refuses_counts_it_cannot_time(short_run):
    for flags, error in (
        (["--sentences=9"], "--sentences: the test split has 8 sentences, fewer than 9"),
        (
            ["--sentences=2,4", "--search_batch_size=4"],
            "--search_batch_size=4 needs --sentences from 1 to at least 4",
        ),
    ):
        result = run_python(
            ["-m", "benchmarks.batch_step_parts", f"--model_dir={short_run}", *flags],
            check=False,
        )
        assert result.returncode != 0
        assert error in result.stderr


def test_floor_share(short_run):
    # Without --saved_model: the benchmark writes the run's default export.
    line = _last_json(
        [
            "-m",
            "benchmarks.floor_share",
            f"--model_dir={short_run}",
            "--rounds=1",
            "--latency_sentences=2",
            "--batch_size=4",
        ]
    )
    assert len(line["rounds"]) == 1
    summary = line["summary"]
    assert summary["sentences"] == SENTENCES
    # The two translators run the same search, and so do their file batches searched one
    # per core in new processes, and their lone requests searched one part per core.
    assert summary["identical_in_process_export"] == SENTENCES
    for name in ("in_process", "export"):
        for key in (
            "batch1_ms",
            "batch_sentences_per_sec",
            "batch1_share",
            "batch1_shapes_share",
            "batch1_request_share",
            "batch_share",
            "batch_rows_share",
            "file_batches_sentences_per_sec",
            "file_batches_share",
            "file_batches_rows_share",
            "lone_requests_sentences_per_sec",
            "lone_requests_share",
            "lone_requests_rows_share",
        ):
            assert summary[name][key] > 0, (name, key)
        assert summary[name]["file_batches_identical"] == SENTENCES
        # Lone requests are searched in parts: the same translations.
        assert summary[name]["lone_requests_identical"] == SENTENCES
    # One batch per core, plus one.
    assert all(
        r["file_batches_in_flight"] == len(os.sched_getaffinity(0)) + 1 for r in line["rounds"]
    )
    assert all(r["floor_rows_selection_batch_sentences_per_sec"] > 0 for r in line["rounds"])


def test_int8_products_scores_the_run_with_int8_weights(short_run):
    line = _last_json(
        [
            "-m",
            "benchmarks.int8_products",
            f"--model_dir={short_run}",
            "--rows=2",
            "--input_dim=8",
            "--output_dim=8",
            "--rounds=1",
            "--seconds=0.01",
        ]
    )
    scores = line["scores"]
    assert scores["sentences"] == SENTENCES and 0 <= scores["unchanged"] <= SENTENCES
    for name in ("float32", "int8_weights"):
        assert 0 <= scores[name]["bleu"] <= 100 and scores[name]["chrf"] > 0


def test_floor_share_needs_the_ctranslate2_pieces(short_run):
    result = run_python(
        [
            "-m",
            "benchmarks.floor_share",
            f"--model_dir={short_run}",
            "--ctranslate2_model=/nonexistent",
        ],
        check=False,
    )
    assert result.returncode != 0
    assert "--ctranslate2_sentencepiece" in result.stderr


def test_floor_shares_are_medians_of_each_rounds_ratio():
    rounds = [
        {
            "floor_selection_batch1_ms": floor_ms,
            "floor_selection_batch_sentences_per_sec": floor_rate,
            "floor_rows_selection_batch_sentences_per_sec": rows_rate,
            "floor_shapes_selection_batch1_ms": shapes_ms,
            "request_floor_batch1_ms": shapes_ms + 4,
            "a_batch1_ms": ms,
            "a_batch_sentences_per_sec": rate,
        }
        for floor_ms, floor_rate, rows_rate, shapes_ms, ms, rate in (
            (10, 200, 125, 12, 20, 100),
            (5, 400, 200, 6, 20, 100),
            (8, 100, 100, 9, 10, 90),
        )
    ]
    summary = floor_share.shares(rounds, ["a"])["a"]
    assert summary["batch1_ms"] == 20 and summary["batch_sentences_per_sec"] == 100
    # Per round 0.5, 0.25 and 0.8 of the floor's time; 0.5, 0.25 and 0.9 of its rate.
    assert summary["batch1_share"] == 0.5 and summary["batch_share"] == 0.5
    # 0.8, 0.5 and 0.9 of the floor at the searches' rows.
    assert summary["batch_rows_share"] == 0.8
    # 0.6, 0.3 and 0.9 of the batch-1 floor at the requests' shapes.
    assert summary["batch1_shapes_share"] == 0.6
    # 0.8, 0.5 and 1.3 of the request floor.
    assert summary["batch1_request_share"] == 0.8


def test_shortlist_sizes(short_run):
    line = _last_json(
        [
            "-m",
            "benchmarks.shortlist_sizes",
            f"--model_dir={short_run}",
            "--sizes=2:4",
            "--latency_sentences=2",
            "--batch_size=64",
        ]
    )
    assert line["vocab_size"] == 500 and line["cpu"]
    whole, limited = line["rows"]
    assert whole["k"] is None and (limited["k"], limited["n"]) == (2, 4)
    for row in (whole, limited):
        for key in ("valid_bleu", "test_bleu", "batch1_ms", "batch_sentences_per_second"):
            assert key in row, key
    assert 0 < limited["set_size_batch1"] <= limited["set_size_batch"] <= 500


def test_data_scale(tmp_path):
    config = tmp_path / "tiny.cfg"
    config.write_text("\n".join(["--flagfile=configs/multi30k_en_de.cfg", *TINY_MODEL_FLAGS]))
    line = _last_json(
        [
            "-m",
            "benchmarks.data_scale",
            "--pairs=3000,6000",
            "--startup_pairs=3000",
            "--large_pairs=0",
            f"--config={config}",
            f"--work_dir={tmp_path / 'work'}",
        ]
    )
    assert set(line["prepare"]) == {"3000", "6000"} and set(line["startup"]) == {"3000"}
    for figures in line["prepare"].values():
        assert figures["seconds"] > 0 and figures["peak_rss_gb"] > 0 and figures["disk_mb"] > 0
    assert line["startup"]["3000"]["seconds_to_exit"] > 0


def test_iterator_deletion():
    line = _last_json(["-m", "benchmarks.iterator_deletion", "--quick"])
    assert line["quick"] is True and line["trials_autotune"] > 0
    assert line["flat_map_max_boundary_gap_seconds"] >= 0


def test_family_comparison(short_corpus, tmp_path):
    # One arm (every arm takes the same path): a tiny PoseNet trained on the small corpus,
    # scored and timed on SENTENCES validation and test pairs.
    corpus = {"train": short_corpus["train"]}
    for split, stem in (("validation", "val"), ("test", "test_2016_flickr")):
        corpus[split] = str(tmp_path / split)
        write_multi30k_split(corpus[split], stem, SENTENCES)
    config = tmp_path / "posenet.cfg"
    config.write_text(
        "\n".join(
            [
                f"--data_dir={tmp_path / 'data'}",
                *local_corpus_flags(corpus),
                *POSENET_TINY_FLAGS,
                "--max_epochs=1",
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
        "-m",
        "benchmarks.family_comparison",
        "--seed=3",
        f"--arms=tiny:{config}",
        f"--runs_dir={tmp_path / 'runs'}",
        "--latency_sentences=2",
        "--batch_size=64",
        # The buckets are tested with the export (tests/test_export.py); here their
        # compilation would only lengthen the arm's export and its load.
        "--nobuckets",
    ]
    line = _last_json(arguments)
    arm = line["arms"]["tiny"]
    assert line["seed"] == 3 and arm["epochs"] == 1 and arm["updates"] > 0
    assert arm["parameters"] > 0 and arm["train_seconds"] > 0 and arm["train_tokens_per_sec"] > 0
    for key in ("bleu", "chrf", "approx_bleu", "approx_bleu_unpadded"):
        assert 0 <= arm[key] <= 100
    assert arm["batch1_ms"] > 0 and arm["batch64_sentences_per_sec"] > 0
