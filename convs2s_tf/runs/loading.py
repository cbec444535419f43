"""Loading a run directory's model (config + checkpoint) and tokenizer for inference."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import keras
import tensorflow as tf

from convs2s_tf.data.tokenizer import Tokenizer
from convs2s_tf.models import ConvS2S
from convs2s_tf.models.families import build_model as build_family_model
from convs2s_tf.runs.checkpoints import restore_checkpoint
from convs2s_tf.runs.run_directory import RunDirectory


def read_run_config(model_dir: str) -> dict[str, Any]:
    """The `config.json` content of the run in `model_dir` (see `RunDirectory`)."""
    return RunDirectory(model_dir).read_config()


def find_checkpoint(model_dir: str, checkpoint: str | None = None) -> str:
    """`checkpoint` if given, else the best checkpoint, else the latest one."""
    return RunDirectory(model_dir).find_checkpoint(checkpoint)


def build_model(model_config: Mapping[str, Any], compute_dtype: str | None = None) -> ConvS2S:
    """A built model from its config (`convs2s_tf.models.families.build_model`).

    Args:
        model_config: `config.json`'s `"model"`: its family (default ConvS2S) and the
            constructor arguments.
        compute_dtype: None or `"float32"`, or `"bfloat16"` for the `mixed_bfloat16`
            policy (float32 variables, bfloat16 matrix products).

    Raises:
        ValueError: An unknown `compute_dtype`.
    """
    previous = keras.config.dtype_policy()
    if compute_dtype not in (None, "float32", "bfloat16"):
        raise ValueError(f"compute_dtype must be float32 or bfloat16, got {compute_dtype!r}.")
    # Keras gives each layer the global policy when it is constructed (a training run
    # may have left it at mixed_bfloat16).
    keras.config.set_dtype_policy("mixed_bfloat16" if compute_dtype == "bfloat16" else "float32")
    try:
        model = build_family_model(model_config)
        model(model.dummy_inputs())
    finally:
        keras.config.set_dtype_policy(previous)
    return model


def load_trained_model(
    model_dir: str,
    checkpoint: str | None = None,
    sentencepiece_model: str | None = None,
    compute_dtype: str | None = None,
    tokenizer_factory: Callable[[str, dict[str, Any], str | None], Any] | None = None,
) -> tuple[ConvS2S, Any, str, dict[str, Any]]:
    """Builds the run's model, restores its weights and loads its tokenizer.

    Args:
        model_dir: A run directory (see `RunDirectory`).
        checkpoint: A checkpoint path; default the best, else the latest.
        sentencepiece_model: Overrides the SentencePiece model named in config.json
            (None: that one; "" or a run without one: no tokenizer).
        compute_dtype: None or "float32", or "bfloat16" (see `build_model`).
        tokenizer_factory: For runs with token vocabularies (imported from fairseq):
            `(model_dir, run_config, sentencepiece_model) -> tokenizer`, e.g.
            `convs2s_tf.interop.tokenizer_for_run`, which reads their dictionaries.

    Returns:
        `(model, tokenizer_or_None, checkpoint_path, run_config)`.

    Raises:
        FileNotFoundError: `model_dir` holds no run.
        CheckpointError: No usable checkpoint.
        ValueError: A run with token vocabularies and no `tokenizer_factory`.
    """
    run = RunDirectory(model_dir)
    run_config = run.read_config()
    model = build_model(run_config["model"], compute_dtype)
    path = run.find_checkpoint(checkpoint)
    restore_checkpoint(tf.train.Checkpoint(model=model), path)
    vocabulary = run.vocabulary_files(run_config)
    if vocabulary is not None:
        if tokenizer_factory is None:
            raise ValueError(
                f"{model_dir} numbers its tokens by {vocabulary.format} vocabularies: loading "
                "it needs a tokenizer_factory (convs2s_tf.interop.tokenizer_for_run)."
            )
        tokenizer = tokenizer_factory(model_dir, run_config, sentencepiece_model)
        return model, tokenizer, path, run_config
    if sentencepiece_model is None:
        sentencepiece_model = run.sentencepiece_model(run_config)
    tokenizer = Tokenizer(sentencepiece_model) if sentencepiece_model else None
    return model, tokenizer, path, run_config
