"""Checkpoint restore that never silently starts afresh."""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf


class CheckpointError(RuntimeError):
    """A checkpoint that exists but cannot be used, or one asked for that is missing."""


def has_checkpoint_files(directory: str) -> bool:
    """Whether `directory` holds anything that looks like a checkpoint.

    Args:
        directory: A checkpoint directory (it need not exist).

    Returns:
        True if it holds a `checkpoint` state file or a `ckpt-*` file.
    """
    if not tf.io.gfile.isdir(directory):
        return False
    return any(
        name == "checkpoint" or name.startswith("ckpt-") for name in tf.io.gfile.listdir(directory)
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


def restore_checkpoint(checkpoint: tf.train.Checkpoint, path: str, partial: bool = False) -> Any:
    """Restores `path` into `checkpoint`, raising `CheckpointError` naming the problem.

    Every object of `checkpoint` (model, optimiser, state) must be built first so that
    all its variables are matched.

    Args:
        checkpoint: A `tf.train.Checkpoint` of built objects.
        path: A checkpoint prefix.
        partial: Let objects the checkpoint does not hold keep their values (for
            checkpoints older than those objects).

    Returns:
        The restore status.

    Raises:
        CheckpointError: `path` is missing, corrupt or from another model.
    """
    if not tf.io.gfile.exists(path + ".index"):
        raise CheckpointError(f"Checkpoint {path} does not exist (no {path}.index).")
    try:
        status = checkpoint.restore(path)
        if partial:
            status.assert_nontrivial_match()
        else:
            status.assert_existing_objects_matched()
        # Inference restores the model alone: optimiser slots may stay unused.
        status.expect_partial()
    except Exception as error:  # noqa: BLE001 (any failure here must name the checkpoint)

        message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise CheckpointError(
            f"Checkpoint {path} cannot be restored ({type(error).__name__}: {message}). It is "
            "corrupt or from a different model; remove it (or point `model_dir` elsewhere) "
            "to start afresh."
        ) from error
    return status


def latest_checkpoint(directory: str) -> str | None:
    """The newest checkpoint in `directory`, None when there is none at all.

    Args:
        directory: A checkpoint directory (it need not exist).

    Returns:
        The checkpoint prefix named by the directory's `checkpoint` state file, or None.

    Raises:
        CheckpointError: when checkpoint files exist but the newest one named by the
            `checkpoint` state file is missing or incomplete.
    """
    if not has_checkpoint_files(directory):
        return None
    state_file = os.path.join(directory, "checkpoint")
    if not tf.io.gfile.exists(state_file):
        raise CheckpointError(
            f"{directory} holds checkpoint files but no 'checkpoint' state file naming the "
            "latest one; refusing to start afresh over them."
        )
    state = tf.train.get_checkpoint_state(directory)
    if state is None or not state.model_checkpoint_path:
        raise CheckpointError(f"The checkpoint state file {state_file} is unreadable or empty.")
    # get_checkpoint_state already resolves a relative path against `directory`.
    path = state.model_checkpoint_path
    if not tf.io.gfile.exists(path + ".index"):
        raise CheckpointError(
            f"The latest checkpoint {path} named in {state_file} is missing; refusing to start "
            "afresh. Restore the file or remove the directory."
        )
    return path
