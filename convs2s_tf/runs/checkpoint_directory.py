"""A directory of `ckpt-<step>` checkpoints: listed by step, its state file rebuilt when
torn, kept by a `tf.train.CheckpointManager`."""

from __future__ import annotations

import os
import re
import time

import tensorflow as tf
from absl import logging

from convs2s_tf.runs.checkpoints import (
    STATE_FILE,
    CheckpointError,
    UnreadableCheckpointError,
    checkpoint_file_names,
    checkpoint_state,
    has_checkpoint_files,
)

# A CheckpointManager names checkpoints `<prefix>-<step>`.
CHECKPOINT_PREFIX = "ckpt"


def checkpoint_step(path: str) -> int:
    # A CheckpointManager names checkpoints `ckpt-<step>`.
    return int(path.rsplit("-", 1)[-1])


def checkpoint_files_by_step(directory: str) -> list[str]:
    """The checkpoints of `directory` by their files, whatever its state file says.

    Args:
        directory: A checkpoint directory (it need not exist).

    Returns:
        The prefixes `ckpt-<step>` of the `ckpt-<step>.index` files (which may still be
        torn), oldest (lowest step) first, but those of interrupted saves (see
        `checkpoint_file_names`); [] when there are none.
    """
    pattern = re.compile(rf"{re.escape(CHECKPOINT_PREFIX)}-\d+\.index")
    names = [name for name in checkpoint_file_names(directory) if pattern.fullmatch(name)]
    paths = [os.path.join(directory, name[: -len(".index")]) for name in names]
    return sorted(paths, key=checkpoint_step)


def checkpoints_by_step(directory: str) -> list[str]:
    """The complete checkpoints a `CheckpointManager` keeps in `directory`, by step.

    Those its `checkpoint` state file names; with that file missing or torn, those of the
    directory's files (see `checkpoint_files_by_step`).

    Args:
        directory: A checkpoint directory (it need not exist).

    Returns:
        Checkpoint prefixes, oldest (lowest step) first; [] when there are none.
    """
    if not has_checkpoint_files(directory):
        return []
    try:
        state = checkpoint_state(directory)
    except UnreadableCheckpointError:
        state = None
    if state is None:
        return checkpoint_files_by_step(directory)
    paths = [
        path for path in state.all_model_checkpoint_paths if tf.io.gfile.exists(path + ".index")
    ]
    return sorted(paths, key=checkpoint_step)


def rebuild_torn_state(directory: str) -> None:
    """Rewrites a torn or missing `checkpoint` state file of `directory` from its
    checkpoint files.

    A `tf.train.CheckpointManager` fails over some torn state files (ValueError) and
    forgets the checkpoints named by others, never deleting them: this runs before one is
    made. A state file goes missing when the first save of a directory is killed while
    it is written (its checkpoint is complete by then): readers would refuse the
    directory (see `latest_checkpoint`) and the manager would never delete the file.

    Args:
        directory: A checkpoint directory (it need not exist).

    Raises:
        CheckpointError: The state file is torn and there is no checkpoint file to rebuild
            it from.
    """
    state_file = os.path.join(directory, STATE_FILE)
    try:
        if checkpoint_state(directory) is not None or not checkpoint_files_by_step(directory):
            return
        problem = UnreadableCheckpointError(
            f"{directory} holds checkpoint files but no state file.",
            path=state_file,
            reason="it is missing",
            subject=f"Checkpoint state file {state_file}",
        )
    except UnreadableCheckpointError as error:
        problem = error
    paths = checkpoint_files_by_step(directory)
    if not paths:
        raise CheckpointError(
            f"{problem} {directory} holds no checkpoint to rebuild it from; remove it to "
            "start afresh."
        )
    # What a CheckpointManager writes: paths relative to `directory`, the latest last, and
    # times after the last preserved one (it would keep older checkpoints forever).
    names = [os.path.basename(path) for path in paths]
    now = time.time()
    lines = [f'model_checkpoint_path: "{names[-1]}"']
    lines += [f'all_model_checkpoint_paths: "{name}"' for name in names]
    lines += [f"all_model_checkpoint_timestamps: {now}" for _ in names]
    lines += [f"last_preserved_timestamp: {now - 1}"]
    with tf.io.gfile.GFile(state_file + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    tf.io.gfile.rename(state_file + ".tmp", state_file, overwrite=True)
    logging.warning(
        "%s is unreadable (%s); rebuilt it from the checkpoint files, the latest %s.",
        problem.subject,
        problem.reason,
        paths[-1],
    )


def checkpoint_manager(
    checkpoint: tf.train.Checkpoint,
    directory: str,
    max_to_keep: int,
    step_counter: tf.Variable | None = None,
) -> tf.train.CheckpointManager:
    """A `tf.train.CheckpointManager` of `ckpt-<N>` in `directory`, whose state file is
    rebuilt first if torn or missing (see `rebuild_torn_state`)."""
    rebuild_torn_state(directory)
    return tf.train.CheckpointManager(
        checkpoint,
        directory,
        max_to_keep=max_to_keep,
        step_counter=step_counter,
        checkpoint_name=CHECKPOINT_PREFIX,
    )
