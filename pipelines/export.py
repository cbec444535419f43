"""Exports a trained model as a SavedModel for TF Serving.

    python -m pipelines.export --flagfile=configs/multi30k_en_de.cfg \\
        [--model_dir=runs/...] [--checkpoint=...] [--export_dir=saved_models/NAME]

Writes EXPORT_DIR/<next version>/ (signatures serving_default, translate_nbest,
translate_ids, translate_with_attention; the SentencePiece model inside; warm-up
requests in assets.extra/) plus EXPORT_DIR/models.config and batching_parameters.txt.
A model imported from fairseq without a SentencePiece model (pipelines.import_fairseq)
is exported with the translate_ids signature only, its dictionaries in assets.extra/.
--export_dir defaults to saved_models/<basename of --model_dir>. The beam search options
(--beam_size, --max_len_a, ...), --inference_dtype and --xla_decode are fixed in the
export.
"""

import os

from absl import app, flags

from pipelines import flags as pipeline_flags

FLAGS = flags.FLAGS
pipeline_flags.define_all_flags()


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.model_dir:
        raise app.UsageError("--model_dir is required.")
    try:
        search_options = pipeline_flags.search_options_from_flags()
    except flags.ValidationError as error:
        raise app.UsageError(str(error))
    from convs2s_tf.export import export_translator
    from convs2s_tf.training.loading import load_trained_model

    model, tokenizer, checkpoint, run_config = load_trained_model(
        FLAGS.model_dir,
        FLAGS.checkpoint,
        sentencepiece_model=FLAGS.sentencepiece_model,
        compute_dtype=FLAGS.inference_dtype,
    )
    if tokenizer is None:
        raise app.UsageError(
            "This run has no SentencePiece model; give --sentencepiece_model to export text "
            "signatures."
        )
    export_dir = FLAGS.export_dir or os.path.join(
        "saved_models", os.path.basename(os.path.normpath(FLAGS.model_dir))
    )
    if getattr(tokenizer, "pretokenized", False):
        # An imported fairseq model without SentencePiece: token ids in and out.
        from convs2s_tf.interop import run_dictionaries
        from convs2s_tf.interop.token_export import export_ids_translator

        version_dir = export_ids_translator(
            model, export_dir, *run_dictionaries(FLAGS.model_dir, run_config), search_options
        )
    else:
        version_dir = export_translator(model, tokenizer, export_dir, search_options)
    print(f"Exported {checkpoint} to {version_dir}")
    return 0


if __name__ == "__main__":
    app.run(main)
