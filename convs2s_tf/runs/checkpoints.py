"""Checkpoint restore that never silently starts afresh."""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import tensorflow as tf
from absl import logging as absl_logging

STATE_FILE = "checkpoint"

# What a save cut short leaves (TensorFlow 2.21): `Checkpoint.write` writes the shards of
# `ckpt-N` into `ckpt-N_temp/`, then moves their data to `ckpt-N.data-*`, writes
# `ckpt-N.index` in place (not atomically) and deletes `ckpt-N_temp/`; a
# `CheckpointManager` then writes its state file to `checkpoint.tmp<hex>` and renames it.
# So while `ckpt-N_temp/` exists, the files of `ckpt-N` may be torn, and no state file
# named the new `ckpt-N` yet.
TEMP_SUFFIX = "_temp"
_STATE_TEMP_PREFIX = STATE_FILE + ".tmp"
# The leftovers warned about already: one warning each per process, however many readers
# list their directory.
_warned_leftovers: set[str] = set()

# What reading a checkpoint's files raises when they are missing, truncated or garbled
# (TensorFlow's reader turns OUT_OF_RANGE, "Read less bytes than requested", into an
# IndexError); a checkpoint of another model raises ValueError or AssertionError instead.
_UNREADABLE_ERRORS = (tf.errors.OpError, IndexError)


class CheckpointError(RuntimeError):
    """A checkpoint that exists but cannot be used, or one asked for that is missing."""


class UnreadableCheckpointError(CheckpointError):
    """A checkpoint, or a checkpoint state file, whose files cannot be read: missing,
    truncated or garbled (not one of another model, which is a plain `CheckpointError`).

    A resumed run falls back to an older checkpoint over one of these.

    Args:
        message: The error message.
        path: The unreadable checkpoint prefix or state file.
        reason: Why it cannot be read, in a few words.
        subject: What `path` is, for messages (default `"Checkpoint <path>"`).
    """

    def __init__(self, message: str, path: str, reason: str, subject: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason
        self.subject = subject or f"Checkpoint {path}"


def checkpoint_file_names(directory: str) -> list[str]:
    """The names of `directory`'s entries but what an interrupted save left there.

    Left out, with one warning each per process: a `ckpt-N_temp/` folder with the files
    of `ckpt-N` (torn, perhaps, and named by no state file unless an older `ckpt-N` was
    being replaced), and a `checkpoint.tmp*` file. (A save under way in another process
    looks the same: readers skip its files as they should.)

    Args:
        directory: A checkpoint directory (it need not exist).

    Returns:
        Entry names (folders without their trailing `/`), sorted.
    """
    if not tf.io.gfile.isdir(directory):
        return []
    names = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(directory))
    interrupted = {name[: -len(TEMP_SUFFIX)] for name in names if name.endswith(TEMP_SUFFIX)}
    leftovers: dict[str, list[str]] = {}
    kept = []
    for name in names:
        if name.endswith(TEMP_SUFFIX) or name.startswith(_STATE_TEMP_PREFIX):
            leftovers.setdefault(name, [])
        elif "." in name and name.split(".", 1)[0] in interrupted:
            leftovers.setdefault(name.split(".", 1)[0] + TEMP_SUFFIX, []).append(name)
        else:
            kept.append(name)
    for name, files in leftovers.items():
        _warn_leftover(os.path.join(directory, name), files)
    return kept


def _warn_leftover(path: str, files: list[str]) -> None:
    """Warns, once per process, that the leftover `path` (and its `files`) is ignored."""
    if path in _warned_leftovers:
        return
    _warned_leftovers.add(path)
    also = f" (and {', '.join(files)} beside it)" if files else ""
    absl_logging.warning(
        "Ignoring %s%s: left by a checkpoint save that was interrupted (or is under way); "
        "once no run writes there, it can be deleted.",
        path,
        also,
    )


def has_checkpoint_files(directory: str) -> bool:
    """Whether `directory` holds anything that looks like a checkpoint.

    Args:
        directory: A checkpoint directory (it need not exist).

    Returns:
        True if it holds a `checkpoint` state file or a `ckpt-*` file, not counting
        what an interrupted save left (see `checkpoint_file_names`).
    """
    return any(
        name == STATE_FILE or name.startswith("ckpt-") for name in checkpoint_file_names(directory)
    )


def checkpoint_has(path: str, name: str) -> bool:
    """Whether the checkpoint at `path` holds an object saved under the top-level `name`.

    Args:
        path: A checkpoint prefix (`.../ckpt-12`).
        name: A top-level object name of the `tf.train.Checkpoint` (e.g. `"schedule"`).

    Returns:
        False too when the checkpoint cannot be read.
    """
    try:
        return any(key.split("/")[0] == name for key, _ in tf.train.list_variables(path))
    except (tf.errors.OpError, ValueError):
        return False


class _CollectMessages(logging.Filter):
    """Keeps the messages of a logger's records instead of letting them through."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.messages.append(record.getMessage())
        return False


def checkpoint_state(directory: str) -> Any:
    """The `CheckpointState` of `directory`'s `checkpoint` file, None if there is none.

    Unlike `tf.train.get_checkpoint_state`, which raises ValueError or UnicodeDecodeError
    on some torn files and logs warnings and returns None on others, every unreadable
    state file raises the same error, and quietly.

    Args:
        directory: A checkpoint directory (it need not exist).

    Returns:
        The parsed state, whose paths are resolved against `directory`, or None.

    Raises:
        UnreadableCheckpointError: The file exists but is empty, torn or garbage, or names
            no checkpoint.
    """
    state_file = os.path.join(directory, STATE_FILE)
    if not tf.io.gfile.exists(state_file):
        return None
    # TensorFlow logs (and then ignores) a file it cannot parse: keep that as the reason.
    collected = _CollectMessages()
    tf_logger = tf.get_logger()
    tf_logger.addFilter(collected)
    try:
        state = tf.train.get_checkpoint_state(directory)
        reason = collected.messages[0] if collected.messages else "cannot be read"
    except UnicodeDecodeError as error:
        state, reason = None, f"not text: {error}"
    except ValueError:  # the file parses but names no checkpoint (an empty file does)
        state, reason = None, "it names no checkpoint"
    finally:
        tf_logger.removeFilter(collected)
    if state is None or not state.model_checkpoint_path:
        raise UnreadableCheckpointError(
            f"The checkpoint state file {state_file} is unreadable or empty ({reason}).",
            path=state_file,
            reason=reason,
            subject=f"Checkpoint state file {state_file}",
        )
    return state


def _describe(error: BaseException, drop_op_name: bool = False) -> str:
    """`error`'s type and the first line of its message (or its repr).

    Args:
        error: An exception.
        drop_op_name: Leave out the `{{function_node ...}}` a TensorFlow op's error
            message starts with.
    """
    text = str(error).strip()
    if drop_op_name:
        text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", text)
    message = text.splitlines()[0] if text else repr(error)
    return f"{type(error).__name__}: {message}"


def restore_checkpoint(checkpoint: tf.train.Checkpoint, path: str) -> Any:
    """Restores `path` into `checkpoint`, raising `CheckpointError` naming the problem.

    Every object of `checkpoint` (model, optimiser, state) must be built first so that
    all its variables are matched.

    Args:
        checkpoint: A `tf.train.Checkpoint` of built objects.
        path: A checkpoint prefix.

    Returns:
        The restore status.

    Raises:
        UnreadableCheckpointError: `path` is missing, or its files cannot be read (they
            are truncated or garbled).
        CheckpointError: `path` is from another model.
    """
    if not tf.io.gfile.exists(path + ".index"):
        raise UnreadableCheckpointError(
            f"Checkpoint {path} does not exist (no {path}.index).",
            path=path,
            reason="its .index file is missing",
        )
    try:
        status = checkpoint.restore(path)
        status.assert_existing_objects_matched()
        # Inference restores the model alone: optimiser slots may stay unused.
        status.expect_partial()
    except Exception as error:  # noqa: BLE001 (any failure here must name the checkpoint)
        message = (
            f"Checkpoint {path} cannot be restored ({_describe(error)}). It is corrupt or "
            "from a different model; remove it (or point `model_dir` elsewhere) to start "
            "afresh."
        )
        if isinstance(error, _UNREADABLE_ERRORS):
            reason = _describe(error, drop_op_name=True)
            raise UnreadableCheckpointError(message, path=path, reason=reason) from error
        raise CheckpointError(message) from error
    return status


def latest_checkpoint(directory: str) -> str | None:
    """The newest checkpoint in `directory`, None when there is none at all.

    Args:
        directory: A checkpoint directory (it need not exist).

    Returns:
        The checkpoint prefix named by the directory's `checkpoint` state file, or None.

    Raises:
        UnreadableCheckpointError: when checkpoint files exist but the `checkpoint` state
            file is missing or unreadable, or the newest checkpoint it names is missing or
            incomplete.
    """
    if not has_checkpoint_files(directory):
        return None
    state_file = os.path.join(directory, STATE_FILE)
    state = checkpoint_state(directory)
    if state is None:
        raise UnreadableCheckpointError(
            f"{directory} holds checkpoint files but no 'checkpoint' state file naming the "
            "latest one; refusing to start afresh over them.",
            path=state_file,
            reason="it is missing",
            subject=f"Checkpoint state file {state_file}",
        )
    # get_checkpoint_state already resolves a relative path against `directory`.
    path = state.model_checkpoint_path
    if not tf.io.gfile.exists(path + ".index"):
        raise UnreadableCheckpointError(
            f"The latest checkpoint {path} named in {state_file} is missing; refusing to start "
            "afresh. Restore the file or remove the directory.",
            path=path,
            reason=f"named in {state_file}, but its .index file is missing",
        )
    return path
