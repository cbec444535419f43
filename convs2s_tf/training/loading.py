"""Loading a trained run (config.json + checkpoint + SentencePiece model) for inference."""

import json
import os

import keras
import tensorflow as tf

from convs2s_tf.data.tokenizer import Tokenizer
from convs2s_tf.models import ConvS2S
from convs2s_tf.training.checkpoints import CheckpointError, latest_checkpoint, restore_checkpoint


def read_run_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"{path} does not exist: --model_dir must be a directory written by "
            "pipelines.train (or pipelines.import_fairseq)."
        )
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def find_checkpoint(model_dir, checkpoint=None):
    """`checkpoint` if given, else the best checkpoint, else the latest one."""
    if checkpoint:
        return checkpoint
    for subdirectory in ("best", "checkpoints"):
        path = latest_checkpoint(os.path.join(model_dir, subdirectory))
        if path:
            return path
    raise CheckpointError(f"No checkpoint in {model_dir}/best or {model_dir}/checkpoints.")


def build_model(model_config, compute_dtype=None):
    """A built `ConvS2S` from its config; `compute_dtype="bfloat16"` gives it the
    `mixed_bfloat16` policy (float32 variables, bfloat16 matrix products)."""
    previous = keras.config.dtype_policy()
    if compute_dtype not in (None, "float32", "bfloat16"):
        raise ValueError(f"compute_dtype must be float32 or bfloat16, got {compute_dtype!r}.")
    # Keras gives each layer the global policy when it is constructed (a training run
    # may have left it at mixed_bfloat16).
    keras.config.set_dtype_policy("mixed_bfloat16" if compute_dtype == "bfloat16" else "float32")
    try:
        model = ConvS2S(**model_config)
        model(model.dummy_inputs())
    finally:
        keras.config.set_dtype_policy(previous)
    return model


def load_trained_model(model_dir, checkpoint=None, sentencepiece_model=None, compute_dtype=None):
    """Builds the run's model, restores its weights and loads its tokenizer.

    Args:
        model_dir: A run directory (config.json, best/, checkpoints/).
        checkpoint: A checkpoint path; default the best, else the latest.
        sentencepiece_model: Overrides the SentencePiece model named in config.json
            (None: that one; "" or a run without one: no tokenizer). A run imported from
            fairseq always gets a `VocabularyTokenizer` over its dictionaries: over
            space-separated tokens without a SentencePiece model, over plain text with
            one.
        compute_dtype: None or "float32", or "bfloat16" (see `build_model`).

    Returns:
        `(model, tokenizer_or_None, checkpoint_path, run_config)`.
    """
    run_config = read_run_config(model_dir)
    model = build_model(run_config["model"], compute_dtype)
    path = find_checkpoint(model_dir, checkpoint)
    restore_checkpoint(tf.train.Checkpoint(model=model), path)
    if run_config.get("vocabulary"):
        # An imported fairseq model: its own dictionaries, pre-tokenised text unless a
        # SentencePiece model segments it (see convs2s_tf.interop).
        from convs2s_tf.interop import tokenizer_for_run

        tokenizer = tokenizer_for_run(model_dir, run_config, sentencepiece_model)
        return model, tokenizer, path, run_config
    if sentencepiece_model is None:
        sentencepiece_model = run_config.get("sentencepiece_model")
    tokenizer = Tokenizer(sentencepiece_model) if sentencepiece_model else None
    return model, tokenizer, path, run_config
