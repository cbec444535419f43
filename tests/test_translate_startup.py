"""What pipelines.translate imports when it starts: TensorFlow without the packages Keras
imports for features no pipeline uses, and no training, scoring or plotting modules."""

import importlib.util
import json

import pytest
from conftest import ROOT, run_python

# Imported by Keras (scikit-learn wrappers, image galleries, notebook detection), by the
# training loop (TensorBoard, sacrebleu, matplotlib) or by tfds: none is needed to translate.
NOT_IMPORTED = (
    "sklearn",
    "matplotlib",
    "IPython",
    "convs2s_tf.training.trainer",
    "convs2s_tf.visualization",
    "sacrebleu",
    "tensorboard",
    "tensorflow_datasets",
)


def _imported_after(code):
    result = run_python(["-c", code])
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_translate_imports_nothing_it_does_not_use_and_hides_nothing_afterwards():
    names = list(NOT_IMPORTED)
    imported = _imported_after(
        "import json, sys\n"
        "import pipelines.translate\n"
        f"print(json.dumps([name for name in {names!r} if name in sys.modules]))\n"
    )
    assert imported == []
    # Hidden only while TensorFlow imports: installed packages import afterwards.
    installed = [name for name in ("sklearn", "matplotlib") if importlib.util.find_spec(name)]
    importable = _imported_after(
        "import importlib, json\n"
        "import pipelines.translate\n"
        f"print(json.dumps([importlib.import_module(n).__name__ for n in {installed!r}]))\n"
    )
    assert importable == installed


@pytest.mark.slow
def test_lazy_exports_of_training_resolve_on_use():
    resolved = _imported_after(
        "import json, sys\n"
        "import convs2s_tf.training as training\n"
        "before = 'convs2s_tf.training.trainer' in sys.modules\n"
        "from convs2s_tf.training import Trainer\n"
        "missing = sorted(set(training.__all__) - set(dir(training)))\n"
        "print(json.dumps([before, Trainer.__module__, missing]))\n"
    )
    assert resolved == [False, "convs2s_tf.training.trainer", []]


@pytest.mark.slow
def test_import_tensorflow_falls_back_when_tensorflow_needs_a_hidden_module():
    # numpy is one TensorFlow cannot do without: the import is repeated without hiding.
    loaded = _imported_after(
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location("
        f"'console_alone', {ROOT + '/pipelines/console.py'!r})\n"
        "console = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(console)\n"
        "tf = console.import_tensorflow(hidden=('numpy',))\n"
        "total = int(tf.reduce_sum(tf.constant([1, 2])))\n"
        "print(json.dumps([total, sys.modules['numpy'] is not None]))\n"
    )
    assert loaded == [3, True]


@pytest.mark.slow
def test_each_batch_searches_on_one_core_unless_tensorflow_already_runs():
    code = (
        "import json, os\n"
        "import tensorflow as tf\n"
        "from convs2s_tf.inference import translator\n"
        "from pipelines import translate\n"
        "if RUNNING:\n"
        "    tf.constant(1.0) + 1.0  # TensorFlow's runtime starts\n"
        "# pipelines.translate searches as the library's function says.\n"
        "assert translate.search_one_batch_per_core is translator.search_one_batch_per_core\n"
        "in_flight = translate.search_one_batch_per_core()\n"
        "threads = tf.config.threading.get_intra_op_parallelism_threads()\n"
        "cores = len(os.sched_getaffinity(0))\n"
        "print(json.dumps([in_flight, cores, threads, translator.IN_FLIGHT_BATCHES]))\n"
    )
    in_flight, cores, threads, default = _imported_after("RUNNING = False\n" + code)
    assert (in_flight, threads) == (cores + 1, 1)
    # Too late to change: the threads stay TensorFlow's default (0: one per core).
    in_flight, cores, threads, default = _imported_after("RUNNING = True\n" + code)
    assert (in_flight, threads) == (default, 0)
