"""What benchmarks take from a trained run: its test sentences and its default export."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_split_paths(model_dir):
    """`(sources, references)`: the paths of the run's prepared test split.

    Raises:
        ValueError: The run names no prepared data.
    """
    from convs2s_tf.data.data_directory import PreparedData
    from convs2s_tf.runs import RunDirectory, read_run_config

    data_dir = RunDirectory(model_dir).data_dir(read_run_config(model_dir))
    if not data_dir:
        raise ValueError(f"{model_dir} names no data_dir")
    return PreparedData.load(data_dir).split_paths("test")


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
