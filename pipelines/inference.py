"""Shared set-up of the inference pipelines: a `Translator` from the flags."""

import os

import tensorflow as tf
from absl import app, flags

from pipelines import flags as pipeline_flags

FLAGS = flags.FLAGS


def search_config_from_flags(*, with_nbest=True):
    """`pipeline_flags.search_config_from_flags`, its errors as usage errors."""
    try:
        return pipeline_flags.search_config_from_flags(with_nbest=with_nbest)
    except flags.ValidationError as error:
        raise app.UsageError(str(error)) from None


def translator_from_flags(search_config, nbest=1, attention=False):
    """The `Translator` of --saved_model, or of --model_dir's checkpoint with
    `search_config`; `nbest` and `attention` say what the caller will ask of it."""
    from convs2s_tf.decoding.translator import Translator

    if FLAGS.saved_model:
        return _saved_model_translator(FLAGS.saved_model, nbest, attention)
    if not FLAGS.model_dir:
        raise app.UsageError("Give --saved_model=DIR or --model_dir=DIR.")
    model, tokenizer, _, _ = load_model_from_flags(search_config)
    if tokenizer is None:
        raise app.UsageError(
            f"{FLAGS.model_dir} names no SentencePiece model; give --sentencepiece_model."
        )
    check_search_fits_model(search_config, model)
    return Translator.from_checkpoint(model, tokenizer, search_config)


def load_model_from_flags(search_config):
    """`load_trained_model` of --model_dir, --checkpoint and --sentencepiece_model, in
    `search_config`'s dtype; returns `(model, tokenizer_or_None, checkpoint, run_config)`.

    Raises:
        app.UsageError: the tokenizer (e.g. another run's --sentencepiece_model) does not
            match the model's vocabulary.
    """
    from convs2s_tf.interop import tokenizer_for_run
    from convs2s_tf.runs import load_trained_model

    loaded = load_trained_model(
        FLAGS.model_dir,
        FLAGS.checkpoint,
        sentencepiece_model=FLAGS.sentencepiece_model,
        compute_dtype=search_config.dtype,
        # A run imported from fairseq reads its own dictionaries.
        tokenizer_factory=tokenizer_for_run,
    )
    model, tokenizer = loaded[:2]
    if tokenizer is not None and tokenizer.vocab_size != model.decoder.vocab_size:
        raise app.UsageError(
            f"The SentencePiece model has {tokenizer.vocab_size} pieces but the model in "
            f"{FLAGS.model_dir} has {model.decoder.vocab_size}: they are from different "
            "vocabularies."
        )
    return loaded


def check_search_fits_model(search_config, model):
    """Raises a usage error if `search_config` cannot work with `model` (e.g. a
    --min_length beyond its longest output), as `TranslationModule` would raise a
    ValueError."""
    try:
        search_config.validate(model.decoder.max_length)
    except ValueError as error:
        raise app.UsageError(str(error)) from None


def _saved_model_translator(path, nbest, attention):
    from convs2s_tf.decoding.translator import Translator
    from convs2s_tf.export import latest_version_dir

    fixed = [
        f"--{name}"
        for name in pipeline_flags.SEARCH_FLAG_FIELDS
        if name != "nbest" and FLAGS[name].present
    ]
    if fixed:
        raise app.UsageError(
            f"{', '.join(fixed)} cannot change a SavedModel's search (fixed at export "
            "time); export again with those flags, or use --model_dir."
        )
    # tf.io.gfile, as the library: a SavedModel may live on a remote filesystem.
    if not tf.io.gfile.exists(path):
        raise app.UsageError(f"--saved_model={path} does not exist.")
    if not tf.io.gfile.isdir(path):
        raise app.UsageError(f"--saved_model={path} is not a directory.")
    try:
        path = latest_version_dir(path)
    except FileNotFoundError:
        pass  # a version directory itself
    if not any(
        tf.io.gfile.exists(os.path.join(path, name))
        for name in ("saved_model.pb", "saved_model.pbtxt")
    ):
        raise app.UsageError(
            f"--saved_model={FLAGS.saved_model} holds no SavedModel (no saved_model.pb in "
            f"{path}): give an export base directory or one of its version directories."
        )
    from convs2s_tf.interop.token_export import TokenIdsTranslator, is_ids_export

    if is_ids_export(path):
        # An imported fairseq model without SentencePiece: tokens in, tokens out.
        if nbest > 1 or attention:
            raise app.UsageError(
                "This export has the translate_ids signature only (best hypothesis, no "
                "attention); use --model_dir for --nbest and --attention_dir."
            )
        return TokenIdsTranslator(path)
    translator = Translator.from_saved_model(path)
    beam_size = translator.beam_size
    if nbest < 1 or (beam_size is not None and nbest > beam_size):
        raise app.UsageError(
            f"--nbest={nbest} must be between 1 and the SavedModel's beam size {beam_size}."
        )
    return translator
