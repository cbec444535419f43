"""Shared set-up of the inference pipelines: a `Translator` or a restored run from the
flags, the library's errors as usage errors."""

import contextlib

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


@contextlib.contextmanager
def usage_errors():
    """Reports the library's `InferenceError`s (a search a sentence or model cannot meet,
    a request a translator cannot serve, a run without a tokenizer, an unusable
    shortlist) as usage errors."""
    from convs2s_tf.inference import InferenceError
    from convs2s_tf.shortlist import ShortlistError

    try:
        yield
    except (InferenceError, ShortlistError) as error:
        raise app.UsageError(str(error)) from error


def shortlist_from_flags():
    """The shortlist file --shortlist and --shortlist_file ask for, or None."""
    if FLAGS.shortlist_file:
        return FLAGS.shortlist_file
    if not FLAGS.shortlist:
        return None
    from convs2s_tf.inference.ensembles import split_paths
    from convs2s_tf.shortlist import shortlist_path

    # An ensemble decodes against its first run's shortlist (they share vocabularies).
    return shortlist_path(split_paths(FLAGS.model_dir)[0])


def translator_from_flags(search_config, nbest=1, attention=False):
    """The `Translator` of --saved_model, or of --model_dir's checkpoint with
    `search_config`; `nbest` and `attention` say what the caller will ask of it, checked
    here before any input is read."""
    if FLAGS.saved_model:
        _check_saved_model_flags()
    elif not FLAGS.model_dir:
        raise app.UsageError("Give --saved_model=DIR or --model_dir=DIR.")
    from convs2s_tf.inference import open_translator

    with usage_errors():
        translator = open_translator(
            saved_model=FLAGS.saved_model,
            model_dir=FLAGS.model_dir,
            checkpoint=FLAGS.checkpoint,
            sentencepiece_model=FLAGS.sentencepiece_model,
            search_config=search_config,
            # A command translates its input once: rather than compiling every bucket at
            # load (seconds for the default model), an export's compile when a batch
            # first needs one, a checkpoint's on a bucket's second batch (translating a
            # file in batches of 64 needs none).
            warm_up=False,
            shortlist=None if FLAGS.saved_model else shortlist_from_flags(),
        )
        translator.check_request(nbest=nbest, attention=attention)
    return translator


def inference_model_from_flags(search_config):
    """The `InferenceModel` of --model_dir, --checkpoint and --sentencepiece_model, in
    `search_config`'s dtype and with its search checked against the model."""
    from convs2s_tf.inference import load_inference_model

    with usage_errors():
        return load_inference_model(
            FLAGS.model_dir,
            FLAGS.checkpoint,
            FLAGS.sentencepiece_model,
            search_config,
            shortlist=shortlist_from_flags(),
        )


def _check_saved_model_flags():
    from convs2s_tf.export import find_saved_model

    fixed = [
        f"--{name}"
        for name in [*pipeline_flags.SEARCH_FLAG_FIELDS, "shortlist", "shortlist_file"]
        if name != "nbest" and FLAGS[name].present
    ]
    if fixed:
        raise app.UsageError(
            f"{', '.join(fixed)} cannot change a SavedModel's search (fixed at export "
            "time); export again with those flags, or use --model_dir."
        )
    path = FLAGS.saved_model
    # tf.io.gfile, as the library: a SavedModel may live on a remote filesystem.
    if not tf.io.gfile.exists(path):
        raise app.UsageError(f"--saved_model={path} does not exist.")
    if not tf.io.gfile.isdir(path):
        raise app.UsageError(f"--saved_model={path} is not a directory.")
    if find_saved_model(path) is None:
        raise app.UsageError(
            f"--saved_model={path} holds no SavedModel (no saved_model.pb): give an export "
            "base directory or one of its version directories."
        )
