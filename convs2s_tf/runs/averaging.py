"""Checkpoint averaging, as fairseq's `scripts/average_checkpoints.py`.

The element-wise mean of several checkpoints' model weights, accumulated in float32.
As fairseq, only the model's floating-point parameters are averaged: the optimiser and
the training state are not carried over (an averaged checkpoint holds the model alone),
and a non-float variable keeps the last checkpoint's value.
"""

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from convs2s_tf.models import ConvS2S
from convs2s_tf.runs.checkpoints import CheckpointError, restore_checkpoint
from convs2s_tf.runs.loading import build_model
from convs2s_tf.runs.run_directory import RunDirectory

# The note `config.json` of an averaged run keeps: the checkpoints it is the mean of.
AVERAGED_FROM_KEY = "averaged_from"


def average_checkpoints(paths: Sequence[str], model: ConvS2S) -> None:
    """Sets `model`'s weights to the element-wise mean of those of `paths`.

    Args:
        paths: Checkpoint prefixes of the same model (any `tf.train.Checkpoint` holding
            it as `model`: a training checkpoint or a model-only one).
        model: The built model the checkpoints were written from.

    Raises:
        ValueError: `paths` is empty.
        CheckpointError: A checkpoint is missing, corrupt or from another model.
    """
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint.")
    checkpoint = tf.train.Checkpoint(model=model)
    sums = None
    for path in paths:
        # Restoring into the built model checks every checkpoint's structure and shapes.
        restore_checkpoint(checkpoint, path)
        values = [variable.numpy() for variable in model.weights]
        if sums is None:
            # float32 at least, as fairseq upcasts half-precision parameters to sum them.
            sums = [value.astype(np.promote_types(value.dtype, np.float32)) for value in values]
            continue
        for total, value in zip(sums, values):
            if np.issubdtype(value.dtype, np.floating):
                total += value
    assert sums is not None  # `paths` is not empty
    for variable, value, total in zip(model.weights, values, sums):
        # A non-float variable keeps the last checkpoint's value, restored last.
        if np.issubdtype(value.dtype, np.floating):
            variable.assign((total / len(paths)).astype(value.dtype))


def check_same_model(run_config: Mapping[str, Any], paths: Sequence[str]) -> None:
    """Refuses checkpoints written by a run with another model config.

    Args:
        run_config: The `config.json` content of the run the mean is built for.
        paths: Checkpoint prefixes; those inside a run directory with a `config.json`
            are checked against it (others are checked by restoring them).

    Raises:
        CheckpointError: naming the first checkpoint of another model.
    """
    for path in paths:
        owner = RunDirectory.of_checkpoint(path)
        if not tf.io.gfile.exists(owner.config_path):
            continue
        other = owner.read_config().get("model")
        if other != run_config["model"]:
            raise CheckpointError(
                f"Checkpoint {path} belongs to {owner.path}, whose model differs from the "
                f"one averaged ({other} vs {run_config['model']}): only checkpoints of one "
                "model can be averaged."
            )


def averaged_model(run_config: Mapping[str, Any], paths: Sequence[str]) -> ConvS2S:
    """A model built from `run_config` holding the mean of `paths`' weights.

    Raises:
        CheckpointError: A checkpoint is unusable or from another model.
    """
    check_same_model(run_config, paths)
    # float32 variables whatever the training's compute dtype: the mean is of weights.
    model = build_model(run_config["model"], "float32")
    average_checkpoints(paths, model)
    return model


def write_averaged_checkpoint(model_dir: str, paths: Sequence[str]) -> str:
    """Writes the mean of `paths` into the run's `averaged/` (`average_last_n`).

    Args:
        model_dir: The run directory the checkpoints belong to.
        paths: Checkpoint prefixes of that run.

    Returns:
        The checkpoint path written.
    """
    run = RunDirectory(model_dir).absolute()
    model = averaged_model(run.read_config(), paths)
    return run.averaged_checkpoint_manager(tf.train.Checkpoint(model=model)).save()


def write_averaged_run(source_dir: str, paths: Sequence[str], output_dir: str) -> str:
    """Writes a run directory holding the mean of `paths` as its `best/` checkpoint.

    Its `config.json` is the source run's (the files it names as absolute paths) plus
    `"averaged_from"`: the checkpoints averaged. Translation, evaluation and export
    accept it as `model_dir`.

    Args:
        source_dir: The run directory whose model the checkpoints hold.
        paths: Checkpoint prefixes.
        output_dir: The run directory to write; not the source run, and not a run other
            than an averaged one (its `best/` would be replaced).

    Returns:
        The checkpoint path written.

    Raises:
        FileNotFoundError: `source_dir` holds no run.
        CheckpointError: A checkpoint is unusable or from another model.
        ValueError: `output_dir` is the source run or holds another run.
    """
    source = RunDirectory(source_dir).absolute()
    output = RunDirectory(output_dir).absolute()
    if output.path == source.path:
        raise ValueError(
            f"`output_dir` {output_dir} is the source run: {source.best_dir} would be "
            "replaced. Write the averaged run to a new directory."
        )
    if output.holds_run() and (
        not tf.io.gfile.exists(output.config_path) or AVERAGED_FROM_KEY not in output.read_config()
    ):
        raise ValueError(
            f"`output_dir` {output_dir} holds a run that is not an averaged one; "
            "refusing to replace it."
        )
    run_config = source.read_config()
    model = averaged_model(run_config, paths)
    config = source.portable_config(run_config)
    config[AVERAGED_FROM_KEY] = [os.path.abspath(path) for path in paths]
    output.write_config(config)
    return output.best_checkpoint_manager(tf.train.Checkpoint(model=model)).save()


def last_checkpoints(paths: Sequence[str], count: int, where: str) -> Sequence[str]:
    """The last `count` of `paths` (oldest first), or a clear error if there are fewer.

    Args:
        paths: Checkpoint prefixes, oldest first.
        count: How many are wanted (>= 1).
        where: The directory they are in, for the message.

    Raises:
        ValueError: `count` < 1 or more than `paths` holds.
    """
    if count < 1:
        raise ValueError(f"The number of checkpoints to average must be >= 1, got {count}.")
    if count > len(paths):
        raise ValueError(
            f"{where} holds {len(paths)} checkpoints, fewer than the {count} asked for "
            "(training keeps the last `keep_checkpoints`)."
        )
    return paths[-count:]
