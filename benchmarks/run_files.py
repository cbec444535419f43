"""What benchmarks take from a trained run: its test sentences and its default export."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_data_dir(model_dir):
    """The prepared data directory the run in `model_dir` names.

    Raises:
        ValueError: The run names none.
    """
    from convs2s_tf.runs import RunDirectory, read_run_config

    data_dir = RunDirectory(model_dir).data_dir(read_run_config(model_dir))
    if not data_dir:
        raise ValueError(f"{model_dir} names no data_dir")
    return data_dir


def test_split_paths(model_dir):
    """`(sources, references)`: the paths of the run's prepared test split.

    Raises:
        ValueError: The run names no prepared data.
    """
    from convs2s_tf.data.data_directory import PreparedData

    return PreparedData.load(run_data_dir(model_dir)).split_paths("test")


def test_sentences(model_dir, count=None):
    """The first `count` (None: all) source sentences of the run's prepared test split.

    Raises:
        ValueError: The run names no prepared data, or its test split is shorter.
    """
    from convs2s_tf.data.text_files import read_lines

    sources = read_lines(test_split_paths(model_dir)[0])
    if count is not None and len(sources) < count:
        raise ValueError(f"the test split has {len(sources)} sentences, fewer than {count}")
    return sources[:count]


def export_default(model_dir, export_dir, env=None):
    """Writes `model_dir`'s default export to `export_dir` (`pipelines.export`, a child
    process with environment `env`); returns `export_dir`."""
    subprocess.run(
        [sys.executable, "-m", "pipelines.export", f"--model_dir={model_dir}"]
        + [f"--export_dir={export_dir}"],
        check=True,
        cwd=ROOT,
        env=env,
    )
    return export_dir


def length_order(lengths):
    """Indices of `lengths` from the shortest to the longest, equal lengths in their first
    order (a stable sort, as fairseq's `ordered_indices`)."""
    return sorted(range(len(lengths)), key=lengths.__getitem__)


def index_batches(order, batch_size):
    """`order` cut into consecutive lists of `batch_size` indices (the last one shorter)."""
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
