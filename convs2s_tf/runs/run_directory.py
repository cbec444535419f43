"""The layout of a run directory (`model_dir`), known here and nowhere else.

`pipelines.train` and `pipelines.import_fairseq` write run directories; translation,
evaluation and export read them::

    config.json                          the model's config and what the run was made from
    checkpoints/ckpt-N                   the most recent training checkpoints
    best/ckpt-N                          the checkpoint of the best validation loss (an
                                         imported run's weights, an averaged run's mean)
    epoch_ends/ckpt-N                    the model at the last epoch ends (kept for
                                         `average_last_n`)
    averaged/ckpt-N                      the mean of the last epoch ends' weights
                                         (`average_last_n`)
    source_dict.txt, target_dict.txt     an imported run's token dictionaries
    sentencepiece.model                  an imported run's SentencePiece model, if any
    test_results.json                    test scores of the model the run ends with
    tmp_worker_N/                        a non-chief worker's throwaway checkpoints

(TensorBoard events go to `train/` and `valid/`, see `SummaryLogger`.)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, NamedTuple, overload

import tensorflow as tf
from absl import logging

from convs2s_tf.models.families import DEFAULT_FAMILY, FAMILY_KEY
from convs2s_tf.runs.checkpoint_directory import (
    CHECKPOINT_PREFIX,
    checkpoint_files_by_step,
    checkpoint_manager,
    checkpoints_by_step,
)
from convs2s_tf.runs.checkpoints import CheckpointError, latest_checkpoint

CONFIG_FILE = "config.json"
CHECKPOINTS_SUBDIR = "checkpoints"
BEST_SUBDIR = "best"
EPOCH_ENDS_SUBDIR = "epoch_ends"
AVERAGED_SUBDIR = "averaged"
SOURCE_DICT_FILE = "source_dict.txt"
TARGET_DICT_FILE = "target_dict.txt"
SENTENCEPIECE_FILE = "sentencepiece.model"
TEST_RESULTS_FILE = "test_results.json"
_WORKER_SUBDIR = "tmp_worker_{task_id}"


def _with_default_family(run_config: Mapping[str, Any]) -> dict[str, Any]:
    """`run_config` with its model's family named (a model config naming none, as an
    imported fairseq run's, is ConvS2S's)."""
    run_config = dict(run_config)
    if isinstance(run_config.get("model"), Mapping):
        run_config["model"] = {FAMILY_KEY: DEFAULT_FAMILY, **run_config["model"]}
    return run_config


# What a resumed run must share with the one that wrote the directory, and what changes
# it (an imported run has no data fingerprint nor SentencePiece hash).
_RUN_IDENTITY = {
    "model": "another model (`preset` and the model settings)",
    "data_fingerprint": "other prepared data (`data_dir` and its preparation settings)",
    "vocabulary_sha256": "another SentencePiece vocabulary",
}


class VocabularyFiles(NamedTuple):
    """The token vocabularies of a run whose ids are not SentencePiece's.

    Fields:
        format: What the dictionaries are (e.g. `"fairseq_dictionary"`).
        source: Path of the source dictionary.
        target: Path of the target dictionary (the same file for a joined one).
        sentencepiece_model: Path of the SentencePiece model segmenting plain text into the
            dictionaries' tokens, or None (pre-tokenised text).
    """

    format: str
    source: str
    target: str
    sentencepiece_model: str | None


def _absolute(path: str) -> str:
    # A URL (gs://...) is absolute already; os.path.abspath would mangle it.
    return path if "://" in path else os.path.abspath(path)


class RunDirectory:
    """A run directory: its files, its config and its checkpoints.

    Args:
        path: The directory (it need not exist yet); relative paths stay relative.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)

    @classmethod
    def of_checkpoint(cls, path: str) -> RunDirectory:
        """The run directory holding a checkpoint of its `checkpoints/`, `best/`, ...

        (Whether it holds a run is for `holds_run` to say.)"""
        return cls(os.path.dirname(os.path.dirname(_absolute(path))))

    def __repr__(self) -> str:
        return f"RunDirectory({self._path!r})"

    @property
    def path(self) -> str:
        """The directory, as given."""
        return self._path

    @property
    def config_path(self) -> str:
        """`config.json`: the run's model config and what it was made from."""
        return os.path.join(self._path, CONFIG_FILE)

    @property
    def checkpoints_dir(self) -> str:
        """The most recent training checkpoints (what a resumed run continues from)."""
        return os.path.join(self._path, CHECKPOINTS_SUBDIR)

    @property
    def best_dir(self) -> str:
        """The checkpoint of the best validation loss (what inference uses)."""
        return os.path.join(self._path, BEST_SUBDIR)

    @property
    def epoch_ends_dir(self) -> str:
        """The model at the last epoch ends, kept to be averaged (`average_last_n`)."""
        return os.path.join(self._path, EPOCH_ENDS_SUBDIR)

    @property
    def averaged_dir(self) -> str:
        """The mean of the last epoch ends' weights (what inference prefers)."""
        return os.path.join(self._path, AVERAGED_SUBDIR)

    @property
    def test_results_path(self) -> str:
        """Where training writes the best checkpoint's test scores."""
        return os.path.join(self._path, TEST_RESULTS_FILE)

    def absolute(self) -> RunDirectory:
        """This directory with an absolute path (checkpoint state files stay valid
        whatever the working directory)."""
        return RunDirectory(_absolute(self._path))

    def worker_directory(self, task_id: int) -> RunDirectory:
        """Where a non-chief worker writes the checkpoints it must write and then drops."""
        return RunDirectory(os.path.join(self._path, _WORKER_SUBDIR.format(task_id=task_id)))

    def holds_run(self) -> bool:
        """Whether a run was written here already (a config or a best checkpoint)."""
        return tf.io.gfile.exists(self.config_path) or tf.io.gfile.exists(self.best_dir)

    # ---------------------------------------------------------------- config
    def read_config(self) -> dict[str, Any]:
        """The content of `config.json`.

        Raises:
            FileNotFoundError: There is none: this is not a run directory.
        """
        path = self.config_path
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(
                f"{path} does not exist: `model_dir` must be a directory written by "
                "training (or by a fairseq import)."
            )
        with tf.io.gfile.GFile(path) as f:
            return json.load(f)

    def write_config(self, run_config: Mapping[str, Any]) -> None:
        """Writes `run_config` as `config.json`, atomically (a reader never sees half).

        Args:
            run_config: A JSON-serialisable dict (at least `"model"`).
        """
        tf.io.gfile.makedirs(self._path)
        path = self.config_path
        with tf.io.gfile.GFile(path + ".tmp", "w") as f:
            json.dump(run_config, f, indent=2, sort_keys=True)
        tf.io.gfile.rename(path + ".tmp", path, overwrite=True)

    def check_same_run(self, run_config: Mapping[str, Any]) -> None:
        """Refuses to resume a run with another model, other data or another vocabulary.

        Args:
            run_config: The config the new run would write.

        Raises:
            ValueError: if the directory already holds a run whose `config.json` differs
                from `run_config` in its model config, data fingerprint or vocabulary.
        """
        if not tf.io.gfile.exists(self.config_path):
            return
        existing = _with_default_family(self.read_config())
        run_config = _with_default_family(run_config)
        for key, what in _RUN_IDENTITY.items():
            if key in existing and key in run_config and existing[key] != run_config[key]:
                raise ValueError(
                    f"{self.config_path} describes {what} than asked for now (stored "
                    f"{key}={existing[key]}, now {run_config[key]}): resuming would mix them. "
                    "Use a new `model_dir`, or the original settings and data."
                )

    # ----------------------------------------------------------- checkpoints
    def latest_checkpoint(self) -> str | None:
        """The newest checkpoint of `checkpoints/`, or None (see `latest_checkpoint`)."""
        return latest_checkpoint(self.checkpoints_dir)

    def best_checkpoint(self) -> str | None:
        """The checkpoint of `best/`, or None (see `latest_checkpoint`)."""
        return latest_checkpoint(self.best_dir)

    def averaged_checkpoint(self) -> str | None:
        """The checkpoint of `averaged/`, or None (see `latest_checkpoint`)."""
        return latest_checkpoint(self.averaged_dir)

    def recent_checkpoints(self) -> list[str]:
        """The checkpoints of `checkpoints/`, oldest first (see `checkpoints_by_step`)."""
        return checkpoints_by_step(self.checkpoints_dir)

    def epoch_end_checkpoints(self) -> list[str]:
        """The checkpoints of `epoch_ends/`, oldest first (see `checkpoints_by_step`)."""
        return checkpoints_by_step(self.epoch_ends_dir)

    def find_checkpoint(self, checkpoint: str | None = None) -> str:
        """The checkpoint to translate with.

        The averaged model comes first: a run trained with `average_last_n` ends with
        it and scores its test split with it, so inference with default flags must agree.

        Args:
            checkpoint: An explicit checkpoint path, returned as it is.

        Returns:
            `checkpoint` if given, else the averaged checkpoint, else the best one, else
            the latest one.

        Raises:
            CheckpointError: There is none, or one is unusable.
        """
        path = (
            checkpoint
            or self.averaged_checkpoint()
            or self.best_checkpoint()
            or self.latest_checkpoint()
        )
        if not path:
            raise CheckpointError(f"No checkpoint in {self.best_dir} or {self.checkpoints_dir}.")
        return path

    def resume_checkpoint(self) -> str | None:
        """The checkpoint a resumed training run continues from, or None for a fresh run.

        The latest of `checkpoints/`; with that gone but `best/` present, the best one (a
        fresh start would overwrite it at its first epoch end). `TrainingCheckpoints.resume`
        falls back to `resume_candidates` when that one is unreadable.

        Raises:
            UnreadableCheckpointError: if checkpoint files exist but the `checkpoint` state
                file is missing or unreadable, or the latest checkpoint it names is missing.
        """
        path = self.latest_checkpoint()
        if path is None:
            path = self.best_checkpoint()
            if path is not None:
                logging.warning(
                    "%s holds no checkpoint but %s does: resuming from %s.",
                    self.checkpoints_dir,
                    self.best_dir,
                    path,
                )
        return path

    def resume_candidates(self) -> list[str]:
        """Every checkpoint a resumed run may continue from, newest first.

        Those of `checkpoints/` by step, then that of `best/`, by their files (whatever
        the state files say, and whether or not the files are complete): what a resumed
        run falls back to when the latest checkpoint is unreadable.
        """
        return [
            path
            for directory in (self.checkpoints_dir, self.best_dir)
            for path in reversed(checkpoint_files_by_step(directory))
        ]

    def checkpoint_manager(
        self,
        checkpoint: tf.train.Checkpoint,
        max_to_keep: int,
        step_counter: tf.Variable | None = None,
    ) -> tf.train.CheckpointManager:
        """A `tf.train.CheckpointManager` writing `checkpoints/ckpt-<step>`.

        (Each manager of this class first rebuilds a torn or missing state file of its
        directory from the checkpoint files, see `rebuild_torn_state`.)
        """
        return checkpoint_manager(
            checkpoint, self.checkpoints_dir, max_to_keep=max_to_keep, step_counter=step_counter
        )

    def best_checkpoint_manager(
        self, checkpoint: tf.train.Checkpoint
    ) -> tf.train.CheckpointManager:
        """A `tf.train.CheckpointManager` keeping the one best checkpoint in `best/`."""
        return checkpoint_manager(checkpoint, self.best_dir, max_to_keep=1)

    def epoch_end_checkpoint_manager(
        self, checkpoint: tf.train.Checkpoint, max_to_keep: int
    ) -> tf.train.CheckpointManager:
        """A `tf.train.CheckpointManager` keeping the last `max_to_keep` epoch ends."""
        return checkpoint_manager(checkpoint, self.epoch_ends_dir, max_to_keep=max_to_keep)

    def averaged_checkpoint_manager(
        self, checkpoint: tf.train.Checkpoint
    ) -> tf.train.CheckpointManager:
        """A `tf.train.CheckpointManager` keeping the one averaged checkpoint in `averaged/`."""
        return checkpoint_manager(checkpoint, self.averaged_dir, max_to_keep=1)

    def save_best(self, checkpoint: tf.train.Checkpoint) -> str:
        """Saves `checkpoint` as the run's best (an imported run's weights).

        Returns:
            The checkpoint path written.
        """
        return checkpoint.save(os.path.join(self.absolute().best_dir, CHECKPOINT_PREFIX))

    # ------------------------------------------------------------ vocabulary
    @overload
    def resolve(self, path: str) -> str: ...

    @overload
    def resolve(self, path: None) -> None: ...

    def resolve(self, path: str | None) -> str | None:
        """`path` as named in `config.json`: a relative one is inside the run directory."""
        return path if not path or os.path.isabs(path) or "://" in path else self._join(path)

    def _join(self, name: str) -> str:
        return os.path.join(self._path, name)

    def portable_config(self, run_config: Mapping[str, Any]) -> dict[str, Any]:
        """`run_config` with the files it names inside this run as absolute paths, so
        that it stays valid when written into another run directory.

        Args:
            run_config: This run's `config.json` content.

        Returns:
            A new dict.
        """
        portable = dict(run_config)
        if portable.get("sentencepiece_model"):
            # Not None: the config names a model (checked just above).
            portable["sentencepiece_model"] = _absolute(
                self.sentencepiece_model(run_config)  # type: ignore[arg-type]
            )
        if portable.get("data_dir"):
            portable["data_dir"] = _absolute(self.resolve(portable["data_dir"]))
        if portable.get("vocabulary"):
            vocabulary = dict(portable["vocabulary"])
            for side in ("source", "target"):
                vocabulary[side] = _absolute(self.resolve(vocabulary[side]))
            portable["vocabulary"] = vocabulary
        return portable

    def data_dir(self, run_config: Mapping[str, Any]) -> str | None:
        """The prepared data directory the run was trained on, or None if it names none.

        Training stores it as an absolute path; a relative one (written by hand, or by a
        tool that keeps runs relocatable) is inside the run directory, as every other
        path of `config.json`. Either way the answer does not depend on the working
        directory of whoever reads the run.

        Raises:
            FileNotFoundError: The run names a data directory that does not exist.
        """
        path = self.resolve(run_config.get("data_dir"))
        if not path:
            return None
        if not tf.io.gfile.isdir(path):
            raise FileNotFoundError(
                f"{self.config_path} names the prepared data {path}, which does not exist: "
                "prepare it again there, or name the data directory explicitly."
            )
        return path

    def sentencepiece_model(self, run_config: Mapping[str, Any]) -> str | None:
        """The path of the run's SentencePiece model, or None if it names none."""
        return self.resolve(run_config.get("sentencepiece_model")) or None

    def write_vocabulary(
        self,
        vocabulary_format: str,
        source_dict: str,
        target_dict: str,
        sentencepiece_model: str | None,
    ) -> dict[str, Any]:
        """Copies an imported run's dictionaries (and SentencePiece model) into the run.

        Args:
            vocabulary_format: What the dictionaries are (e.g. `"fairseq_dictionary"`).
            source_dict: The source dictionary file.
            target_dict: The target dictionary file.
            sentencepiece_model: The SentencePiece model file, or None.

        Returns:
            The entries naming them, to merge into the run config.
        """
        tf.io.gfile.makedirs(self._path)
        tf.io.gfile.copy(source_dict, self._join(SOURCE_DICT_FILE), overwrite=True)
        tf.io.gfile.copy(target_dict, self._join(TARGET_DICT_FILE), overwrite=True)
        if sentencepiece_model:
            tf.io.gfile.copy(sentencepiece_model, self._join(SENTENCEPIECE_FILE), overwrite=True)
        return {
            # Relative paths resolve against the run directory.
            "sentencepiece_model": SENTENCEPIECE_FILE if sentencepiece_model else None,
            "vocabulary": {
                "format": vocabulary_format,
                "source": SOURCE_DICT_FILE,
                "target": TARGET_DICT_FILE,
            },
        }

    def vocabulary_files(self, run_config: Mapping[str, Any]) -> VocabularyFiles | None:
        """The token vocabularies `run_config` names, or None for SentencePiece ids.

        Args:
            run_config: The run's `config.json` content.

        Returns:
            A `VocabularyFiles` with resolved paths, or None.
        """
        entry = run_config.get("vocabulary")
        if not entry:
            return None
        return VocabularyFiles(
            format=entry.get("format"),
            source=self.resolve(entry["source"]),
            target=self.resolve(entry["target"]),
            sentencepiece_model=self.sentencepiece_model(run_config),
        )
