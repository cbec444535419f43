"""The teacher of a distillation: its runs, the checkpoints they translate with, and the
prepared data (training source, validation and test splits, SentencePiece model) they
were trained on."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from convs2s_tf.data.data_directory import PreparedData
from convs2s_tf.distillation.errors import DistillationError
from convs2s_tf.inference.ensembles import member_checkpoints, split_paths
from convs2s_tf.runs import RunDirectory


@dataclasses.dataclass(frozen=True)
class Teacher:
    """The runs that translate the training source, and the data they were trained on.

    Attributes:
        model_dirs: The run directories, absolute: one, or an ensemble's.
        checkpoints: The checkpoint each run translates with, absolute.
        data: The first run's prepared data (an ensemble's runs share their vocabulary).
        sentencepiece_model: The SentencePiece model the teacher reads and writes with,
            which the distilled data is tokenised with.
    """

    model_dirs: tuple[str, ...]
    checkpoints: tuple[str, ...]
    data: PreparedData
    sentencepiece_model: str

    @property
    def source_lang(self) -> str:
        return self.data.source_lang

    @property
    def target_lang(self) -> str:
        return self.data.target_lang

    def training_files(self) -> tuple[str, str]:
        """The (source, target) files of the teacher's prepared training split."""
        return self.data.split_paths("train")

    def identity(self) -> dict[str, Any]:
        """What the teacher's translations depend on, for a distillation's plan."""
        return {
            "model_dirs": list(self.model_dirs),
            "checkpoints": list(self.checkpoints),
            "data_fingerprint": self.data.summary.get("fingerprint"),
        }


def _absolute(path: str) -> str:
    # A URL (gs://...) is absolute already.
    return path if "://" in path else os.path.abspath(path)


def find_teacher(model_dir: str | Sequence[str], checkpoint: str | None = None) -> Teacher:
    """The teacher named by `model_dir`, checked before any model loads.

    Args:
        model_dir: A run directory (trained or averaged), or several separated by commas
            (or a list): an ensemble, as `convs2s_tf.inference.load_inference_model` takes.
        checkpoint: The checkpoint of each run (comma-separated), or None: each run's
            averaged, else best, else latest one.

    Raises:
        FileNotFoundError: A run directory holds no run, or its prepared data is missing.
        CheckpointError: A run has no usable checkpoint.
        InferenceError: `checkpoint` names another number of checkpoints than runs.
        DistillationError: The run names no prepared data, or its data has no prepared
            training split.
    """
    model_dirs = [_absolute(path) for path in split_paths(model_dir)]
    if not model_dirs:
        raise DistillationError("Give the teacher's run directory (`model_dir`).")
    runs = [RunDirectory(path) for path in model_dirs]
    configs = [run.read_config() for run in runs]
    checkpoints = [
        _absolute(run.find_checkpoint(member))
        for run, member in zip(runs, member_checkpoints(model_dirs, checkpoint))
    ]
    data_dir = runs[0].data_dir(configs[0])
    if data_dir is None:
        raise DistillationError(
            f"{runs[0].config_path} names no prepared data (a run imported from fairseq): "
            "the teacher must be a run trained here, whose training source is distilled."
        )
    try:
        data = PreparedData.load(data_dir)
    except FileNotFoundError:
        raise DistillationError(
            f"The teacher's data directory {data_dir} holds no prepared data: prepare it "
            "again with the flags that prepared it (python -m pipelines.prepare_data)."
        ) from None
    if "train" not in data.splits or not all(
        os.path.isfile(path) for path in data.split_paths("train")
    ):
        raise DistillationError(
            f"The teacher's prepared data {data.data_dir} has no prepared training split "
            f"(train.{data.source_lang}, train.{data.target_lang}): nothing to distil."
        )
    sentencepiece_model = runs[0].sentencepiece_model(configs[0]) or data.sentencepiece_model_path
    return Teacher(
        model_dirs=tuple(model_dirs),
        checkpoints=tuple(checkpoints),
        data=data,
        sentencepiece_model=_absolute(sentencepiece_model),
    )
