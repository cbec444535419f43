"""Shared fixtures of the test suite (shared helper functions live in tests/helpers/)."""

import collections
import gc
import os
import shutil
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# One XLA compilation cache for the whole run, its test processes and their children
# (pytest-xdist names the run): the tests' models share their shapes, so a bucket that one
# test compiled is loaded from disk by the next export or warm-up that needs it.
_XLA_CACHE = os.path.join(
    tempfile.gettempdir(),
    f"convs2s_tf_tests_xla_{os.environ.get('PYTEST_XDIST_TESTRUNUID', os.getpid())}",
)
os.environ.setdefault("TF_XLA_FLAGS", f"--tf_xla_persistent_cache_directory={_XLA_CACHE}")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from helpers.corpora import (  # noqa: E402, F401
    multi30k_lines,
    write_local_corpus,
    write_multi30k_split,
)
from helpers.in_process import run_in_process  # noqa: E402
from helpers.models import (  # noqa: E402
    randomize_weights,
    small_model_config,
    write_random_run,
)
from helpers.python_forkserver import ForkServer  # noqa: E402

# Imported from here by the pipeline tests (`from conftest import ROOT, ...`).
from helpers.subprocesses import (  # noqa: E402, F401
    ROOT,
    SEARCH_FLAGS,
    run_python,
    subprocess_env,
)


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):  # the controller, once every worker ended
        shutil.rmtree(_XLA_CACHE, ignore_errors=True)


# About how many seconds the longest modules take on 2 cores (`--durations=0`, rounded).
# Only the order of a run depends on it: the longest first, so that the two workers end
# together (a stale figure costs seconds, never a result).
LONG_MODULES = {
    "tests/test_posenet_pipelines.py": 220,
    "tests/test_benchmarks.py": 170,
    "tests/test_compare_ctranslate2.py": 160,
    "tests/test_docs.py": 155,
    "tests/test_training_soak.py": 115,
    "tests/test_distributed_training.py": 110,
    "tests/test_export.py": 110,
    "tests/test_train_cli.py": 80,
    "tests/test_compare_fairseq.py": 70,
    "tests/training/test_torn_checkpoints.py": 70,
}


def pytest_collection_modifyitems(items):
    """`LONG_MODULES` longest first, then modules with the most `slow` tests, the rest in
    collection order.

    `scripts/run_tests.sh` hands whole modules to two workers in this order
    (`--dist loadfile --no-loadscope-reorder`): the long end-to-end modules start at once
    and the many short ones fill the gaps, so that neither worker ends minutes after the
    other (xdist's own order, by number of tests, started them last).
    """
    slow_tests = collections.Counter(
        item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")
    )
    modules = list(dict.fromkeys(item.nodeid.split("::")[0] for item in items))
    rank = {
        module: (-LONG_MODULES.get(module, 0), -slow_tests[module], index)
        for index, module in enumerate(modules)
    }
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(0)
    yield


@pytest.fixture(autouse=True)
def _absl_verbosity():
    # A pipeline run in process (`pipelines.cli.run`) lowers absl's verbosity to WARNING;
    # restored, it cannot hide the INFO messages a later test of the same process reads.
    # (Its own level, unset at first: `get_verbosity` would give the effective level, and
    # setting that would stop the logger from following the root level `caplog` sets.)
    from absl import logging as absl_logging

    logger = absl_logging.get_absl_logger()
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture(scope="module")
def frozen_heap():
    """Collects garbage once, then freezes what survives (`gc.freeze`) while the module
    runs: its tests' own `gc.collect()` calls then scan only the objects made since. In a
    worker that ran other modules first (their models, graphs and SavedModels alive in
    caches), full collections made tests/training/test_save_kill_points.py take 12.1 s
    after two other modules, 3.4 s with the heap frozen."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture(scope="session")
def fork_server():
    """Processes forked with TensorFlow imported once (`run_python(fork_server=...)`),
    for tests whose subprocesses need their own pid and signals, not a fresh import."""
    with ForkServer(subprocess_env()) as server:
        yield server


@pytest.fixture
def forked_benchmark_children(fork_server, monkeypatch):
    """The benchmarks' child processes forked from `fork_server` (`benchmarks.PYTHON`),
    TensorFlow imported already: a smoke test checks what they print, not how fast a
    fresh process starts."""
    import benchmarks

    monkeypatch.setattr(benchmarks, "PYTHON", (sys.executable, "-S", fork_server.shim))
    monkeypatch.setenv("PYTHON_FORKSERVER", fork_server.path)


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory):
    """A local en-de corpus from real Multi30k lines: 2,000 training pairs (gzip),
    200 validation and 200 test pairs (plain). Returns {split: prefix}."""
    return write_local_corpus(tmp_path_factory.mktemp("small_corpus"), 2000, 200, 200)


@pytest.fixture(scope="session")
def short_corpus(tmp_path_factory):
    """`small_corpus` cut to 500 training pairs and 40 validation and test pairs: for
    runs that must see whole epochs (or many of them), not learn."""
    return write_local_corpus(tmp_path_factory.mktemp("short_corpus"), 500, 40, 40)


@pytest.fixture(scope="session")
def small_prepared(small_corpus, tmp_path_factory):
    """`small_corpus` prepared with a 500-piece BPE model (a PrepareResult)."""
    from convs2s_tf.data.prepare import PrepareConfig, prepare_data

    config = PrepareConfig(
        data_dir=str(tmp_path_factory.mktemp("small_prepared")),
        dataset="local",
        source_lang="en",
        target_lang="de",
        split_prefixes=small_corpus,
        vocab_size=500,
    )
    return prepare_data(config)


@pytest.fixture
def no_network(monkeypatch):
    """Makes any attempt to open a network connection fail the test at once."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[:1]}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture(scope="session")
def tiny_run(small_prepared, tmp_path_factory):
    """A run directory as pipelines.train writes it: config.json and a checkpoint of a
    small random model over the small corpus' 500-piece vocabulary."""
    from convs2s_tf.models import ConvS2S

    vocab_size = small_prepared.summary["vocab_size"]
    model = ConvS2S(**small_model_config(vocab_size, max_positions=64))
    model(model.dummy_inputs())
    randomize_weights(model, seed=21, scale=0.5)
    return write_random_run(tmp_path_factory.mktemp("tiny_run"), model, small_prepared)


@pytest.fixture(scope="session")
def exported(tiny_run, tmp_path_factory):
    export_dir = tmp_path_factory.mktemp("saved_models") / "tiny"
    result = run_in_process(
        [
            "-m",
            "pipelines.export",
            f"--model_dir={tiny_run}",
            f"--export_dir={export_dir}",
            *SEARCH_FLAGS,
        ]
    )
    assert f"{export_dir}/1" in result.stdout
    return export_dir
