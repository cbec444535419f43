"""End-to-end tests of `python -m pipelines.train` on a small real corpus."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from conftest import ROOT, run_python, subprocess_env
from helpers.corpora import local_corpus_flags
from helpers.in_process import run_in_process
from tensorboard.backend.event_processing import event_accumulator

# A tiny model so that each run takes seconds on 2 cores.
TINY_MODEL = [
    "--embed_dim=32",
    "--encoder_layers=[(32, 3)] * 2",
    "--decoder_layers=[(32, 3)] * 2",
    "--decoder_out_embed_dim=32",
    "--dropout=0.1",
    "--max_tokens=600",
]


def _command(small_corpus, data_dir, model_dir, *extra):
    return [
        "-m",
        "pipelines.train",
        *local_corpus_flags(small_corpus),
        f"--data_dir={data_dir}",
        f"--model_dir={model_dir}",
        "--progress_bar=false",
        "--test_beam_size=0",
        *TINY_MODEL,
        *extra,
    ]


def _run(command):
    """Runs the pipeline of `command` (`["-m", "pipelines.NAME", *flags]`) in process."""
    return run_in_process(command, check=False)


def _evaluate_scores(data_dir, model_dir):
    """Returns the scores `pipelines.evaluate --json` prints with otherwise default flags."""
    command = ["-m", "pipelines.evaluate", f"--data_dir={data_dir}"]
    evaluation = _run(command + [f"--model_dir={model_dir}", "--json"])
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    return json.loads(evaluation.stdout.strip().splitlines()[-1])


def _latest_step(model_dir):
    state = tf.train.get_checkpoint_state(os.path.join(model_dir, "checkpoints"))
    if state is None:
        return None
    return int(state.model_checkpoint_path.rsplit("-", 1)[-1])


@pytest.mark.slow  # trains in a process it kills, then twice more
def test_sigkill_mid_epoch_then_resume_and_refuse_another_model(
    small_corpus, tmp_path, fork_server
):
    data_dir, model_dir = tmp_path / "data", tmp_path / "run"
    command = _command(
        small_corpus,
        data_dir,
        model_dir,
        "--max_steps=60",
        "--save_every_steps=10",
        "--valid_beam_size=0",
    )
    process = subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            step = _latest_step(str(model_dir))
            if step is not None and step >= 20:
                break
            assert process.poll() is None, process.stderr.read().decode()[-3000:]
            time.sleep(0.2)
        else:
            pytest.fail("no checkpoint at step 20 within 300 s")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        process.kill()
    killed_at = _latest_step(str(model_dir))
    assert 20 <= killed_at < 60
    # One epoch of this corpus is longer than 60 steps: the kill was mid-epoch. The
    # "Resumed from" line is logged at INFO, which the pipelines show on request.
    # The restarts fork from the fork server (the kill needs the process Popen started).
    resumed = run_python([*command, "--verbosity=0"], check=False, fork_server=fork_server)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Resumed from {model_dir}/checkpoints/ckpt-{killed_at}" in resumed.stderr
    assert _latest_step(str(model_dir)) == 60
    reader = tf.train.load_checkpoint(os.path.join(model_dir, "checkpoints", "ckpt-60"))
    assert reader.get_tensor("state/step/.ATTRIBUTES/VARIABLE_VALUE") == 60
    # Re-running a finished command does no more steps.
    again = run_python(command, check=False, fork_server=fork_server)
    assert again.returncode == 0 and _latest_step(str(model_dir)) == 60
    # The default (quiet) console says in one line that the re-run continues the run.
    resumed_lines = [line for line in again.stdout.splitlines() if "Resumed from" in line]
    assert len(resumed_lines) == 1
    assert resumed_lines[0].startswith(f"Resumed from {model_dir}/checkpoints/ckpt-60: step 60,")
    # The run directory describes its model: other model flags are refused, not resumed.
    other = [*command, "--embed_dim=48"]
    refused = run_python(other, check=False, fork_server=fork_server)
    assert refused.returncode != 0
    assert "describes another model" in refused.stderr


def _tags(directory):
    accumulator = event_accumulator.EventAccumulator(
        directory, size_guidance={event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    return set(accumulator.Tags()["tensors"])


@pytest.mark.slow  # trains, validates, tests and evaluates
def test_tensorboard_events_hold_every_summary(short_corpus, tmp_path):
    """Stopped inside the first epoch (--max_steps), the run still validates and writes
    every summary, and its test score is pipelines.evaluate's with default flags."""
    model_dir = tmp_path / "run"
    result = _run(
        _command(
            short_corpus,
            tmp_path / "data",
            model_dir,
            "--max_steps=5",
            "--log_every_steps=5",
            "--valid_beam_size=2",
            "--attention_sentences=2",
            "--sample_sentences=3",
            "--test_beam_size=5",
        )
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "epoch   1 | step 5" in result.stdout and "valid loss" in result.stdout
    with open(model_dir / "test_results.json") as f:
        test_results = json.load(f)
    assert test_results["stop_reason"] == "reached max_steps"
    scores = _evaluate_scores(tmp_path / "data", model_dir)
    assert scores["chrf"] > 0
    assert (scores["bleu"], scores["chrf"]) == (
        test_results["test_bleu"],
        test_results["test_chrf"],
    )
    assert "test BLEU" in result.stdout and "nrefs:1|case:mixed" in result.stdout
    train = _tags(str(model_dir / "train"))
    for tag in ("loss", "perplexity", "learning_rate", "gradient_norm", "tokens_per_second"):
        assert tag in train, (tag, train)
    assert any(tag.startswith("weights/") for tag in train)
    assert "_hparams_/session_start_info" in train
    valid = _tags(str(model_dir / "valid"))
    for tag in ("loss", "perplexity", "bleu", "translations"):
        assert tag in valid, (tag, valid)
    # One heatmap per decoder block with attention (both blocks here) per sentence.
    for sentence in range(2):
        for block in range(2):
            assert f"attention/sentence_{sentence}/block_{block}" in valid
    assert glob.glob(str(model_dir / "best" / "ckpt-*.index"))
    assert os.path.exists(model_dir / "config.json")
    assert os.path.exists(model_dir / "test_results.json")


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--no_such_flag=1", "Unknown command line flag 'no_such_flag'"),
        ("--encoder_layers=[(32, 3)] * x", "Invalid spec"),
        ("--share_decoder_input_output_embed", "out_embed_dim"),
        ("--min_learning_rate=1.0", "min_learning_rate=1.0 must be below"),
        ("--strategy=tpu", "strategy"),
        ("--preset=nope", "flag --preset=nope: value should be one of"),
    ],
)
def test_bad_flags_fail_with_a_clear_message(small_corpus, tmp_path, flag, message):
    extra = [flag]
    if flag == "--share_decoder_input_output_embed":
        extra.append("--decoder_out_embed_dim=16")
    result = _run(_command(small_corpus, tmp_path / "data", tmp_path / "run", *extra))
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.slow  # trains two epochs, then evaluates
def test_average_last_n_is_what_the_test_score_and_evaluate_use(short_corpus, tmp_path):
    """Epoch ends are kept apart from the (mid-epoch) recent checkpoints and averaged
    into averaged/, which test_results.json scores and names and evaluate then uses."""
    model_dir = tmp_path / "run"
    extra = ["--max_epochs=2", "--save_every_steps=20", "--keep_checkpoints=1"]
    result = _run(
        _command(
            short_corpus,
            tmp_path / "data",
            model_dir,
            *extra,
            "--average_last_n=2",
            "--valid_beam_size=0",
            "--test_beam_size=5",
        )
    )
    assert result.returncode == 0, result.stderr[-3000:]
    epoch_ends = sorted(glob.glob(str(model_dir / "epoch_ends" / "ckpt-*.index")))
    assert len(epoch_ends) == 2 and len(glob.glob(str(model_dir / "checkpoints/*.index"))) == 1
    averaged = glob.glob(str(model_dir / "averaged" / "ckpt-*.index"))
    assert len(averaged) == 1 and "Averaged the last 2 epoch ends" in result.stdout
    with open(model_dir / "test_results.json") as f:
        test_results = json.load(f)
    assert test_results["test_checkpoint"] == averaged[0][: -len(".index")]
    assert test_results["averaged_from"] == [path[: -len(".index")] for path in epoch_ends]
    scores = _evaluate_scores(tmp_path / "data", model_dir)
    assert (scores["bleu"], scores["chrf"]) == (
        test_results["test_bleu"],
        test_results["test_chrf"],
    )


def test_a_local_corpus_without_the_splits_training_reads_is_refused_before_preparing(
    small_corpus, tmp_path
):
    data_dir = tmp_path / "data"
    without_valid = {
        split: prefix for split, prefix in small_corpus.items() if split != "validation"
    }
    result = _run(_command(without_valid, data_dir, tmp_path / "run"))
    assert result.returncode == 2 and "--valid_prefix is required" in result.stderr
    without_test = {split: prefix for split, prefix in small_corpus.items() if split != "test"}
    result = _run([*_command(without_test, data_dir, tmp_path / "run"), "--test_beam_size=5"])
    assert result.returncode == 2 and "--test_prefix is required unless" in result.stderr
    assert not data_dir.exists()


@pytest.mark.slow  # prepares, trains and tests, then twice more
def test_sigterm_during_the_test_translation_then_the_restart_tests_only(
    short_corpus, tmp_path, monkeypatch
):
    """SIGTERM while the finished run translates the test split: exit 143 with nothing
    half written; the same command then tests the run without training, and once more
    it reports the recorded scores without translating again."""
    from convs2s_tf.inference import CheckpointTranslator

    model_dir = tmp_path / "run"
    command = _command(
        short_corpus,
        tmp_path / "data",
        model_dir,
        "--max_steps=3",
        "--valid_beam_size=0",
        "--test_beam_size=1",
    )
    translate = CheckpointTranslator.translate
    translated = []

    def preempted_translate(self, texts, *args, **kwargs):
        translated.append(len(texts))
        os.kill(os.getpid(), signal.SIGTERM)
        return translate(self, texts, *args, **kwargs)

    monkeypatch.setattr(CheckpointTranslator, "translate", preempted_translate)
    preempted = _run(command)
    # (Run in process, the exit status is the line's: `run_in_process` reports 0.)
    assert "Stopped by SIGTERM at step 3 after saving" in preempted.stdout, preempted.stderr
    assert "(exit status 143)" in preempted.stdout and translated
    assert not (model_dir / "test_results.json").exists()

    monkeypatch.setattr(CheckpointTranslator, "translate", translate)
    tested = _run(command)
    assert tested.returncode == 0, tested.stderr[-3000:]
    assert "Nothing to train: the run in" in tested.stdout and "test BLEU" in tested.stdout
    assert json.loads((model_dir / "test_results.json").read_text())["step"] == 3

    def no_translation(self, *args, **kwargs):
        raise AssertionError("the recorded test results were not used")

    monkeypatch.setattr(CheckpointTranslator, "translate", no_translation)
    again = _run(command)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "holds the test scores of this run already" in again.stdout
    assert _latest_step(str(model_dir)) == 3
