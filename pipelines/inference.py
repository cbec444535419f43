"""Shared set-up of the inference pipelines: a `Translator` from the flags."""

from absl import app, flags

from pipelines import flags as pipeline_flags

FLAGS = flags.FLAGS
_SEARCH_FLAGS = (
    "max_len_a",
    "max_len_b",
    "length_penalty",
    "unk_penalty",
    "min_length",
    "inference_dtype",
    "xla_decode",
)


def translator_from_flags():
    """The `Translator` of --saved_model, or of --model_dir's checkpoint."""
    from convs2s_tf.decoding.translator import Translator

    try:
        search_options = pipeline_flags.search_options_from_flags()
    except flags.ValidationError as error:
        raise app.UsageError(str(error))
    if FLAGS.saved_model:
        from convs2s_tf.export import latest_version_dir

        fixed = [name for name in ("beam_size", *_SEARCH_FLAGS) if FLAGS[name].present]
        if fixed:
            raise app.UsageError(
                f"--{', --'.join(fixed)} cannot change a SavedModel's search (fixed at export "
                "time); export again with those flags, or use --model_dir."
            )
        path = FLAGS.saved_model
        try:
            path = latest_version_dir(path)
        except FileNotFoundError:
            pass  # a version directory itself
        from convs2s_tf.interop.token_export import TokenIdsTranslator, is_ids_export

        if is_ids_export(path):
            # An imported fairseq model without SentencePiece: tokens in, tokens out.
            if FLAGS.nbest > 1 or FLAGS.attention_dir:
                raise app.UsageError(
                    "This export has the translate_ids signature only (best hypothesis, no "
                    "attention); use --model_dir for --nbest and --attention_dir."
                )
            return TokenIdsTranslator(path)
        return Translator.from_saved_model(path)
    if not FLAGS.model_dir:
        raise app.UsageError("Give --saved_model=DIR or --model_dir=DIR.")
    from convs2s_tf.training.loading import load_trained_model

    model, tokenizer, _, _ = load_trained_model(
        FLAGS.model_dir,
        FLAGS.checkpoint,
        sentencepiece_model=FLAGS.sentencepiece_model,
        compute_dtype=FLAGS.inference_dtype,
    )
    if tokenizer is None:
        raise app.UsageError(
            f"{FLAGS.model_dir} names no SentencePiece model; give --sentencepiece_model."
        )
    return Translator.from_checkpoint(model, tokenizer, **search_options)
