"""TF Serving's layout: integer version directories under a base directory, each written
atomically, and the server's model config and batching parameters beside them.

    EXPORT_DIR/
        1/  2/ ...                   versions (saved_model.pb, variables/, assets.extra/)
        models.config                tensorflow_model_server --model_config_file
        batching_parameters.txt      tensorflow_model_server --batching_parameters_file
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import tensorflow as tf

MODEL_CONFIG_FILE = "models.config"
BATCHING_PARAMETERS_FILE = "batching_parameters.txt"
BATCHING_PARAMETERS = """\
# TF Serving batching (tensorflow_model_server --enable_batching
#   --batching_parameters_file=batching_parameters.txt): requests are merged into
# batches of up to 64 sentences, waiting at most 5 ms for more to arrive.
max_batch_size { value: 64 }
batch_timeout_micros { value: 5000 }
max_enqueued_batches { value: 100 }
num_batch_threads { value: 2 }
"""
_SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")


def _versions(base_path: str) -> list[int]:
    names = tf.io.gfile.listdir(base_path) if tf.io.gfile.isdir(base_path) else []
    # gfile lists subdirectories of some filesystems with a trailing slash.
    return [int(name.rstrip("/")) for name in names if re.fullmatch(r"\d+/?", name)]


def next_version(export_dir: str) -> int:
    """The next free integer version under `export_dir` (1 for a new directory)."""
    return max(_versions(export_dir), default=0) + 1


def latest_version_dir(base_path: str) -> str:
    """The newest `<base_path>/<version>` holding a saved_model.pb (what TF Serving serves).

    Raises:
        FileNotFoundError: No such version.
    """
    versions = [
        version
        for version in _versions(base_path)
        if tf.io.gfile.exists(os.path.join(base_path, str(version), "saved_model.pb"))
    ]
    if not versions:
        raise FileNotFoundError(f"No SavedModel version under {base_path}.")
    return os.path.join(base_path, str(max(versions)))


def find_saved_model(path: str) -> str | None:
    """The SavedModel directory `path` names, or None.

    Args:
        path: An export base directory (its newest version is meant) or a SavedModel
            directory itself.

    Returns:
        The directory holding saved_model.pb (or .pbtxt), or None if there is none.
    """
    try:
        path = latest_version_dir(path)
    except FileNotFoundError:
        pass  # a version directory itself, or no SavedModel at all
    if any(tf.io.gfile.exists(os.path.join(path, name)) for name in _SAVED_MODEL_FILES):
        return path
    return None


def default_model_name(export_dir: str) -> str:
    """The name TF Serving serves `export_dir` under: its base name."""
    return os.path.basename(os.path.normpath(export_dir))


def write_server_configs(export_dir: str, model_name: str) -> None:
    """Writes `models.config` and `batching_parameters.txt` next to the versions."""
    config = (
        "model_config_list {\n"
        "  config {\n"
        f'    name: "{model_name}"\n'
        f'    base_path: "/models/{model_name}"\n'
        '    model_platform: "tensorflow"\n'
        "  }\n"
        "}\n"
    )
    with tf.io.gfile.GFile(os.path.join(export_dir, MODEL_CONFIG_FILE), "w") as f:
        f.write(config)
    with tf.io.gfile.GFile(os.path.join(export_dir, BATCHING_PARAMETERS_FILE), "w") as f:
        f.write(BATCHING_PARAMETERS)


def write_next_version(
    export_dir: str, write: Callable[[str], object], model_name: str | None = None
) -> str:
    """Writes the next version of `export_dir` atomically, then the server configs.

    Args:
        export_dir: The export base directory (created if missing).
        write: `write(directory)` fills a new, empty version directory.
        model_name: Name in `models.config` (default: `default_model_name(export_dir)`).

    Returns:
        The version directory written.
    """
    version_dir = os.path.join(export_dir, str(next_version(export_dir)))
    # Written under a temporary name and renamed, so a server polling export_dir never
    # sees a half-written version (and a failed export leaves no version behind).
    temporary = version_dir + ".tmp"
    if tf.io.gfile.exists(temporary):
        tf.io.gfile.rmtree(temporary)
    write(temporary)
    tf.io.gfile.rename(temporary, version_dir)
    write_server_configs(export_dir, model_name or default_model_name(export_dir))
    return version_dir
