"""TF Serving's layout: integer version directories under a base directory, each written
atomically, and the server's model config and batching parameters beside them.

    EXPORT_DIR/
        1/  2/ ...                   versions (saved_model.pb, variables/, assets.extra/)
        models.config                tensorflow_model_server --model_config_file
        batching_parameters.txt      tensorflow_model_server --batching_parameters_file
        .tmp-<random>/               an export being written (TF Serving ignores it)

An export is written into its own `.tmp-<random>` directory, flushed to disk, then
renamed to the first free version number; a rename onto a version another export took
meanwhile fails, and the next number is tried. So concurrent exports get distinct
versions and never touch each other's files, and a server or a reader sees a version
only once it is complete. Object stores (gs://, s3://) have no atomic rename: there the
files are copied into the version with `saved_model.pb` last, and two exports racing
to one base may claim the same number (see docs/serving.md).
"""

from __future__ import annotations

import errno
import os
import re
import uuid
from collections.abc import Callable

import tensorflow as tf
from tensorflow_serving.config import model_server_config_pb2

from convs2s_tf.atomic_files import fsync_directory, write_text_atomically

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
STAGING_PREFIX = ".tmp-"
# What a rename onto a version directory that exists raises (a non-empty directory, or a
# file of that name).
_TAKEN_ERRNOS = (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR)
# TF Serving's REST API takes the name as one path segment, `/v1/models/<name>:predict`.
_UNSERVABLE_NAME = re.compile(r"[/:\x00-\x1f\x7f]")


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


class ModelNameError(ValueError):
    """A model name TF Serving cannot serve (a user's mistake: one line)."""


def check_model_name(model_name: str) -> None:
    """Raises ModelNameError (one line) unless TF Serving can serve a model of this name.

    The name is a path segment of TF Serving's REST API and of the base path in
    `models.config` (`/models/<name>`), so it cannot be empty, `.` or `..`, nor hold `/`,
    `:` or control characters. Anything else (spaces, quotes, backslashes, non-ASCII) is
    escaped in `models.config`.
    """
    if model_name in ("", ".", "..") or _UNSERVABLE_NAME.search(model_name):
        raise ModelNameError(
            f"Model name {model_name!r} cannot be served by TF Serving: it must be a "
            "non-empty path segment without '/', ':' or control characters (pass "
            "`model_name`, or name the export directory so)."
        )


def model_config_text(model_name: str) -> str:
    """`models.config` (protobuf text format, escaped by protobuf) serving `model_name`
    from `/models/<model_name>`, where TF Serving's Docker image expects models."""
    check_model_name(model_name)
    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add()
    model.name = model_name
    model.base_path = f"/models/{model_name}"
    model.model_platform = "tensorflow"
    return str(config)  # protobuf's text format, as TF Serving parses it


def write_server_configs(export_dir: str, model_name: str) -> None:
    """Writes `models.config` and `batching_parameters.txt` next to the versions, each
    replaced whole (a server reading one never sees it half-written)."""
    _write_file_atomically(
        os.path.join(export_dir, MODEL_CONFIG_FILE), model_config_text(model_name)
    )
    _write_file_atomically(os.path.join(export_dir, BATCHING_PARAMETERS_FILE), BATCHING_PARAMETERS)


def write_next_version(
    export_dir: str, write: Callable[[str], object], model_name: str | None = None
) -> str:
    """Writes the next version of `export_dir` atomically, then the server configs.

    `write` fills a directory of its own (`.tmp-<random>` under `export_dir`); once it
    returns, the directory is flushed to disk and renamed to the first free version
    number. If `write` raises, its directory is removed and no version is written.

    Args:
        export_dir: The export base directory (created if missing).
        write: `write(directory)` fills a new directory, creating it.
        model_name: Name in `models.config` (default: `default_model_name(export_dir)`).

    Returns:
        The version directory written.

    Raises:
        ValueError: TF Serving cannot serve a model of that name (`check_model_name`),
            or `write` wrote nothing.
    """
    model_name = model_name or default_model_name(export_dir)
    check_model_name(model_name)
    export_dir = _local_form(export_dir)
    tf.io.gfile.makedirs(export_dir)
    staging = os.path.join(export_dir, f"{STAGING_PREFIX}{uuid.uuid4().hex}")
    try:
        write(staging)
        if not tf.io.gfile.isdir(staging) or not tf.io.gfile.listdir(staging):
            raise ValueError(f"The export wrote nothing into {staging}.")
        version_dir = claim_version(export_dir, staging)
    except BaseException:
        if tf.io.gfile.exists(staging):
            tf.io.gfile.rmtree(staging)
        raise
    write_server_configs(export_dir, model_name)
    return version_dir


def claim_version(export_dir: str, staging: str) -> str:
    """Makes the complete directory `staging` the first free version of `export_dir`.

    Locally its files and directories are flushed to disk, then it is renamed; a rename
    onto a number another export took meanwhile fails, and the next number is tried. On
    other file systems its files are copied, `saved_model.pb` last, and then deleted.

    Returns:
        The version directory.
    """
    export_dir, staging = _local_form(export_dir), _local_form(staging)
    if not _is_local(export_dir):
        return _copy_to_next_version(export_dir, staging)
    _sync_tree(staging)
    version = next_version(export_dir)
    while True:
        version_dir = os.path.join(export_dir, str(version))
        try:
            os.rename(staging, version_dir)
        except OSError as error:
            if error.errno not in _TAKEN_ERRNOS:
                raise
            version = max(version + 1, next_version(export_dir))
            continue
        fsync_directory(export_dir)  # the rename itself
        return version_dir


def _copy_to_next_version(export_dir: str, staging: str) -> str:
    """`claim_version` on a file system without atomic renames (an object store)."""
    version_dir = os.path.join(export_dir, str(next_version(export_dir)))
    files = [
        os.path.join(root, name) for root, _, names in tf.io.gfile.walk(staging) for name in names
    ]
    # A reader that waits for saved_model.pb (latest_version_dir, pipelines.serve) finds
    # every other file in place by then.
    files.sort(key=lambda path: os.path.basename(path) in _SAVED_MODEL_FILES)
    for path in files:
        target = os.path.join(version_dir, os.path.relpath(path, staging))
        tf.io.gfile.makedirs(os.path.dirname(target))
        tf.io.gfile.copy(path, target)
    tf.io.gfile.rmtree(staging)
    return version_dir


def _local_form(path: str) -> str:
    """`path` without a `file://` scheme (so that os functions take a local path)."""
    return path.removeprefix("file://")


def _is_local(path: str) -> bool:
    return "://" not in path


def _sync_tree(directory: str) -> None:
    """Flushes every file below `directory` to disk, then every directory, bottom-up (so
    a crash after the rename cannot leave a version with lost or empty files)."""
    for root, _, names in os.walk(directory, topdown=False):
        for name in names:
            _fsync(os.path.join(root, name), os.O_RDONLY)
        fsync_directory(root)


def _fsync(path: str, flags: int) -> None:
    descriptor = os.open(path, flags)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_file_atomically(path: str, text: str) -> None:
    """Writes `path` whole: locally into a temporary file, flushed, then renamed over it
    (an object store publishes an object whole anyway)."""
    path = _local_form(path)
    if not _is_local(path):
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(text)
        return
    write_text_atomically(path, [text], temporary_prefix=STAGING_PREFIX)
