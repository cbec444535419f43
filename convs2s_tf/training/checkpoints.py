"""Moved to `convs2s_tf.runs.checkpoints`; this re-export goes once its callers switch."""

from convs2s_tf.runs.checkpoints import (  # noqa: F401
    CheckpointError,
    checkpoint_has,
    has_checkpoint_files,
    latest_checkpoint,
    restore_checkpoint,
)
