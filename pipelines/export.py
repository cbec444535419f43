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

from pipelines import cli
from pipelines import flags as pipeline_flags
from pipelines.inference import (
    check_search_fits_model,
    load_model_from_flags,
    search_config_from_flags,
)

FLAGS = flags.FLAGS
pipeline_flags.declare_key_flags(
    pipeline_flags.RUN, pipeline_flags.CHECKPOINT, pipeline_flags.SEARCH, pipeline_flags.EXPORT
)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.model_dir:
        raise app.UsageError("--model_dir is required.")
    # translate_nbest returns the whole beam: --nbest plays no part in an export.
    search_config = search_config_from_flags(with_nbest=False)
    from convs2s_tf.export import export_translator

    model, tokenizer, checkpoint, run_config = load_model_from_flags(search_config)
    if tokenizer is None:
        raise app.UsageError(
            "This run has no SentencePiece model; give --sentencepiece_model to export text "
            "signatures."
        )
    export_dir = FLAGS.export_dir or os.path.join(
        "saved_models", os.path.basename(os.path.normpath(FLAGS.model_dir))
    )
    check_search_fits_model(search_config, model)
    if getattr(tokenizer, "pretokenized", False):
        # An imported fairseq model without SentencePiece: token ids in and out.
        from convs2s_tf.interop import run_dictionaries
        from convs2s_tf.interop.token_export import export_ids_translator

        source_dict, target_dict = run_dictionaries(FLAGS.model_dir, run_config)
        version_dir = export_ids_translator(
            model, export_dir, source_dict, target_dict, search_config
        )
    else:
        version_dir = export_translator(model, tokenizer, export_dir, search_config)
    print(f"Exported {checkpoint} to {version_dir}")
    return 0


if __name__ == "__main__":
    cli.run(main)
