"""The command line of every pipeline: --help lists the flags it reads, the shared flagfile
is accepted, a user's mistake is one line on stderr, and the console is quiet by default.

Each subprocess imports TensorFlow (seconds), so the cases run a few at a time and each
one checks several things.
"""

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from absl import flags
from conftest import ROOT, subprocess_env
from helpers.flag_values import parsed_flags
from helpers.python_forkserver import SHIM, ForkServer

from convs2s_tf.decoding.search_config import SearchConfig
from pipelines import console
from pipelines import flags as pipeline_flags

CONFIG = "configs/multi30k_en_de.cfg"
PIPELINES = (
    "prepare_data",
    "train",
    "translate",
    "evaluate",
    "export",
    "import_fairseq",
    "model_summary",
    "serve",
    "client",
    "average_checkpoints",
    "export_fairseq",
    "build_shortlist",
    "distill",
)
# A help line naming a flag: "  --name: ...", "  --[no]name: ...", "  -v,--verbosity: ...".
_HELP_FLAG = re.compile(r"^  (?:-\w,)?--(?:\[no\])?(\w+):", re.MULTILINE)
# absl's Python INFO lines and TensorFlow's C++ ones both start like "I0521 ".
_INFO_LINE = re.compile(r"^I\d{4} ", re.MULTILINE)


def _environment():
    """The pipelines' own logging defaults: no TF_CPP_MIN_LOG_LEVEL from the tests'."""
    env = subprocess_env()
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    return env


@pytest.fixture(scope="module")
def fork_server():
    """Pipelines forked with TensorFlow imported once (as each imports it on start)."""
    with ForkServer(_environment()) as server:
        yield server


def _pipeline(name, *arguments, stdin="", fork_server=None):
    """Runs `python -m pipelines.NAME ARGUMENTS` in a process of its own, forked from
    `fork_server` if given (the TensorFlow import a command starts with, done once)."""
    env = _environment()
    python = [sys.executable]
    if fork_server is not None:
        env["PYTHON_FORKSERVER"] = fork_server.path
        python = [sys.executable, "-S", SHIM]
    return subprocess.run(
        [*python, "-m", f"pipelines.{name}", *arguments],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _run_all(cases, fork_server):
    """{key: (pipeline, arguments)} -> {key: CompletedProcess}, a few processes at a time."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {
            key: pool.submit(_pipeline, name, *args, fork_server=fork_server)
            for key, (name, args) in cases.items()
        }
        return {key: future.result() for key, future in futures.items()}


def test_every_entry_point_is_covered():
    directory = os.path.join(ROOT, "pipelines")
    entry_points = {
        name[: -len(".py")]
        for name in os.listdir(directory)
        if name.endswith(".py")
        and 'if __name__ == "__main__":' in open(os.path.join(directory, name)).read()
    }
    assert entry_points == set(PIPELINES)


def _shared(*groups, also=()):
    return {name for group in groups for name in pipeline_flags.group_flags(group)} | set(also)


@pytest.mark.slow  # --help of every pipeline, in its own process
def test_help_lists_exactly_the_flags_each_pipeline_reads(fork_server):
    g = pipeline_flags
    expected = {
        "prepare_data": _shared(g.DATA, g.PREPARE),
        "train": _shared(g.DATA, g.BATCHING, g.MODEL, g.RUN, g.TRAINING),
        "translate": _shared(g.RUN, g.CHECKPOINT, g.INFERENCE, g.SEARCH, g.TRANSLATE),
        "evaluate": _shared(
            g.RUN, g.CHECKPOINT, g.INFERENCE, g.SEARCH, g.EVALUATE, also=["data_dir", "output"]
        ),
        "export": _shared(g.RUN, g.CHECKPOINT, g.SEARCH, g.EXPORT),
        "import_fairseq": _shared(g.CHECKPOINT, g.IMPORT),
        "model_summary": _shared(g.MODEL, also=["vocab_size", "preset"]),
        "serve": {
            "model_base_path",
            "model_name",
            "host",
            "port",
            "rest_api_port",
            "rest_api_timeout_in_ms",
            "max_concurrent_requests",
            "max_queued_requests",
            "search_part_size",
            "file_system_poll_wait_seconds",
            "shutdown_grace_seconds",
            "max_batch_size",
            "max_sequence_length",
            "warmup_threads",
            "tensorflow_intra_op_parallelism",
            "tensorflow_inter_op_parallelism",
        },
        "client": {"server", "model_name", "signature_name", "timeout"},
        "average_checkpoints": _shared(g.RUN, g.AVERAGE, also=["output_dir"]),
        "export_fairseq": _shared(
            g.RUN, g.CHECKPOINT, also=["output_dir", "source_lang", "target_lang"]
        ),
        "build_shortlist": _shared(g.RUN, g.SHORTLIST),
        "distill": _shared(
            g.RUN, g.SEARCH, g.DISTILL, also=["checkpoint", "batch_size", "workers", "progress_bar"]
        ),
    }
    results = _run_all({name: (name, ["--help"]) for name in PIPELINES}, fork_server)
    for name, result in results.items():
        listed = set(_HELP_FLAG.findall(result.stdout))
        assert listed == expected[name] | {"verbosity"}, (name, result.stdout + result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
    # The review's examples, spelled out.
    assert "--beam_size" in results["translate"].stdout
    assert "--momentum" not in results["translate"].stdout
    assert "--beam_size" not in results["prepare_data"].stdout
    assert "--learning_rate" not in results["export"].stdout
    assert "--nbest" not in results["evaluate"].stdout
    for listed_in_train in ("--momentum", "--preset", "--max_tokens", "--model_dir"):
        assert listed_in_train in results["train"].stdout
    # Help texts are shown, and the search defaults are SearchConfig's.
    assert "Beam width (1: greedy search)." in results["translate"].stdout
    assert f"(default: '{SearchConfig().max_len_b}')" in results["export"].stdout


def _one_line_error(result, name):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (name, result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith(f"{name}: error: "), result.stderr[-3000:]
    return lines[0]


@pytest.mark.slow  # every pipeline in its own process, as a user runs it
def test_user_errors_are_one_line_and_the_flagfile_serves_every_pipeline(
    tiny_run, small_corpus, tmp_path, fork_server
):
    missing = tmp_path / "missing"
    paired_files = [f"--source={small_corpus['test']}.en", f"--reference={small_corpus['test']}.de"]
    corrupt_run = tmp_path / "corrupt_run"
    shutil.copytree(tiny_run, corrupt_run)
    (index,) = (corrupt_run / "checkpoints").glob("ckpt-*.index")
    index.write_bytes(b"this is not a checkpoint index" * 10)
    with_config = f"--flagfile={CONFIG}"
    cases = {
        # (pipeline, arguments): the words the one line must hold.
        ("prepare_data", (with_config, "stray")): "Unexpected arguments: stray",
        ("train", (with_config, "--model_dir=")): "--model_dir is required.",
        ("translate", (with_config, f"--model_dir={missing}")): f"{missing}/config.json does "
        "not exist: --model_dir must be a directory written by training",
        ("evaluate", (with_config, f"--saved_model={missing}", *paired_files)): (
            f"--saved_model={missing} does not exist."
        ),
        (
            "export",
            (with_config, f"--model_dir={tiny_run}", f"--checkpoint={missing}/ckpt-1"),
        ): f"Checkpoint {missing}/ckpt-1 does not exist",
        (
            "import_fairseq",
            (
                with_config,
                f"--checkpoint={missing}.pt",
                f"--source_dict={missing}.txt",
                f"--target_dict={missing}.txt",
                f"--output_dir={tmp_path / 'imported'}",
            ),
        ): f"{missing}.pt does not exist.",
        (
            "export",
            (with_config, f"--model_dir={tiny_run}", f"--export_dir={tmp_path}/a:b"),
        ): "Model name 'a:b' cannot be served by TF Serving",
        ("serve", (with_config, f"--model_base_path={missing}", "--model_name=m")): str(missing),
        ("client", (with_config, "--model_name=m")): "Give sentences as arguments or on stdin.",
        ("translate", (f"--model_dir={tiny_run}", f"--input={missing}.txt")): f"--input file "
        f"{missing}.txt does not exist.",
        ("translate", (f"--model_dir={corrupt_run}",)): "cannot be restored",
        ("translate", (f"--model_dir={tiny_run}", "--min_length=50", "--max_len_b=10")): (
            "--min_length=50 exceeds the maximum output length --max_len_b=10"
        ),
        ("evaluate", (f"--model_dir={tiny_run}", "--beam_size=0")): "--beam_size must be >= 1, "
        "got 0.",
        ("translate", (f"--model_dir={tiny_run}", "--nbest=6", "--beam_size=5")): "--nbest=6 "
        "must be between 1 and --beam_size=5.",
        ("model_summary", ("--preset=nope",)): "flag --preset=nope: value should be one of",
        # The library names its parameters (`checkpoint`); the command line, its flags.
        ("translate", (f"--model_dir={tiny_run},{tiny_run}", "--checkpoint=ckpt-1")): (
            "--checkpoint names 1 checkpoint(s) for 2 run directories in --model_dir: give one "
            "per run"
        ),
        (
            "average_checkpoints",
            (with_config, f"--model_dir={tiny_run}", "--last=5", f"--output_dir={missing}"),
        ): "holds 1 checkpoints, fewer than the 5 asked for",
        (
            "export_fairseq",
            (with_config, f"--model_dir={missing}", f"--output_dir={tmp_path / 'fairseq'}"),
        ): f"{missing}/config.json does not exist",
        ("translate", (f"--model_dir={tiny_run}", "--shortlist")): (
            f"{tiny_run}/shortlist.npz not found: build it with python -m pipelines.build_shortlist"
        ),
        (
            "build_shortlist",
            (with_config, f"--model_dir={tiny_run}", f"--shortlist_source={missing}.en"),
        ): "Give both --shortlist_source and --shortlist_target, or neither.",
        (
            "distill",
            (with_config, f"--model_dir={missing}", f"--output_data_dir={tmp_path / 'out'}"),
        ): f"{missing}/config.json does not exist",
    }
    results = _run_all({key: key for key in cases}, fork_server)
    for (name, arguments), words in cases.items():
        line = _one_line_error(results[name, arguments], name)
        assert words in line, (arguments, line)
        assert "Unknown command line flag" not in line
    # The flagfile with a pipeline that runs to the end.
    summary = _pipeline("model_summary", with_config, fork_server=fork_server)
    assert summary.returncode == 0, summary.stderr[-3000:]
    assert summary.stdout.startswith("multi30k_cpu (8000 -> 8000 tokens)")
    assert "total" in summary.stdout and summary.stderr == ""


@pytest.mark.slow  # TensorFlow's start-up logging, in fresh processes
def test_quiet_console_by_default_and_info_logs_on_request(small_corpus, small_prepared, tmp_path):
    # Re-preparing up-to-date data is cheap, and logs at INFO that nothing was done.
    data_dir = tmp_path / "data"
    shutil.copytree(small_prepared.data.data_dir, data_dir)
    arguments = [
        f"--data_dir={data_dir}",
        "--dataset=local",
        f"--train_prefix={small_corpus['train']}",
        f"--valid_prefix={small_corpus['validation']}",
        f"--test_prefix={small_corpus['test']}",
        "--vocab_size=500",
    ]
    results = _run_all(
        {
            "quiet": ("prepare_data", arguments),
            "verbose": ("prepare_data", [*arguments, "--verbosity=0"]),
        },
        fork_server=None,  # the point: what TensorFlow's import logs
    )
    for result in results.values():
        assert result.returncode == 0, result.stderr[-3000:]
        assert "up to date, nothing done" in result.stdout
    quiet = results["quiet"].stderr
    for noise in ("cuInit", "oneDNN", "cuda", "absl::InitializeLog"):
        assert noise.lower() not in quiet.lower(), quiet
    assert not _INFO_LINE.search(quiet), quiet
    verbose = results["verbose"].stderr
    assert re.search(r"^I\d{4} .*is up to date \(fingerprint", verbose, re.MULTILINE), verbose
    assert "oneDNN" in verbose or "cuda" in verbose.lower(), verbose


def test_requested_verbosity_reads_every_spelling():
    assert console.requested_verbosity([]) is None
    assert console.requested_verbosity(["--verbosity=0"]) == 0
    assert console.requested_verbosity(["--flagfile=x.cfg", "-v", "1"]) == 1
    assert console.requested_verbosity(["--v=-1", "--verbosity", "2"]) == 2
    assert console.requested_verbosity(["--verbosity=info"]) is None
    assert console.requested_verbosity(["--", "--verbosity=0"]) is None


def test_filter_log_lines_drops_only_lines_below_the_level():
    text = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to "
        "STDERR\n"
        "I0000 00:00:1.0 1 port.cc:153] oneDNN custom operations are on.\n"
        "I0000 00:00:1.0 1 cudart_stub.cc:31] Could not find cuda drivers on your machine.\n"
        "W0000 00:00:1.0 1 something.cc:1] a real warning\n"
        "E0000 00:00:1.0 1 cuda_platform.cc:52] failed call to cuInit\n"
        "/x.py:1: UserWarning: from Python\n"
    )
    assert console.filter_log_lines(text, 1) == "".join(text.splitlines(True)[3:])
    assert console.filter_log_lines(text, 3) == "/x.py:1: UserWarning: from Python\n"
    assert console.filter_log_lines(text, 0) == "".join(text.splitlines(True)[1:])


def test_search_flags_default_to_search_config_and_validate_with_its_messages():
    assert pipeline_flags.search_config_from_flags(parsed_flags()) == SearchConfig()
    config = pipeline_flags.search_config_from_flags(
        parsed_flags("--beam_size=4", "--nbest=2", "--inference_dtype=bfloat16", "--xla_decode")
    )
    assert config == SearchConfig(beam_size=4, nbest=2, dtype="bfloat16", xla=True)
    # Pipelines that ignore --nbest keep the default.
    ignored = pipeline_flags.search_config_from_flags(
        parsed_flags("--beam_size=2", "--nbest=9"), with_nbest=False
    )
    assert ignored == SearchConfig(beam_size=2)
    for arguments in (
        ["--beam_size=0"],
        ["--nbest=6", "--beam_size=5"],
        ["--min_length=50", "--max_len_b=10"],
    ):
        fields = {
            pipeline_flags.SEARCH_FLAG_FIELDS[name[2:]]: int(value)
            for name, value in (argument.split("=") for argument in arguments)
        }
        with pytest.raises(ValueError) as expected:
            SearchConfig(**fields).validate()
        with pytest.raises(flags.ValidationError) as raised:
            pipeline_flags.search_config_from_flags(parsed_flags(*arguments))
        assert str(raised.value) == str(expected.value)


def test_cooldown_needs_a_time_limit_longer_than_itself():
    parsed = parsed_flags("--max_train_minutes=58", "--anneal_final_minutes=5")
    assert parsed.anneal_final_minutes == 5.0
    for arguments in (
        ["--anneal_final_minutes=5"],
        ["--max_train_minutes=5", "--anneal_final_minutes=5"],
        ["--max_train_minutes=58", "--anneal_final_minutes=-1"],
    ):
        with pytest.raises(flags.IllegalFlagValueError, match="--anneal_final_minutes needs"):
            parsed_flags(*arguments)
