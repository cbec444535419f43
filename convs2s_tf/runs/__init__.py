"""Run directories: their layout, config, checkpoints, and loading a run for inference.

Depends on `convs2s_tf.data`, `convs2s_tf.models` and `convs2s_tf.vocabulary` only;
training, decoding, export and interop build on it.
"""

from convs2s_tf.runs.checkpoints import (
    CheckpointError,
    checkpoint_has,
    has_checkpoint_files,
    latest_checkpoint,
    restore_checkpoint,
)
from convs2s_tf.runs.loading import (
    build_model,
    find_checkpoint,
    load_trained_model,
    read_run_config,
)
from convs2s_tf.runs.run_directory import RunDirectory, VocabularyFiles

__all__ = [
    "CheckpointError",
    "RunDirectory",
    "VocabularyFiles",
    "build_model",
    "checkpoint_has",
    "find_checkpoint",
    "has_checkpoint_files",
    "latest_checkpoint",
    "load_trained_model",
    "read_run_config",
    "restore_checkpoint",
]
