"""Exports a trained model as a SavedModel for TF Serving.

    python -m pipelines.export --flagfile=configs/multi30k_en_de.cfg \\
        [--model_dir=runs/...] [--checkpoint=...] [--export_dir=saved_models/NAME]

Writes EXPORT_DIR/<next version>/ (signatures serving_default, translate_nbest,
translate_ids, translate_with_attention; the SentencePiece model inside; warm-up
requests in assets.extra/) plus EXPORT_DIR/models.config and batching_parameters.txt.
A model imported from fairseq without a SentencePiece model (pipelines.import_fairseq)
is exported with the translate_ids signature only, its dictionaries in assets.extra/
(the exporters "text" and "token_ids" of convs2s_tf.export).
--model_dir=RUN_A,RUN_B exports an ensemble (every member in the SavedModel, every
signature served; the exporter "ensemble").
--export_dir defaults to saved_models/<basename of --model_dir> (of an ensemble: the
members' base names joined by "+"). The beam search options
(--beam_size, --max_len_a, ...), --inference_dtype and --int8_weights are fixed in the
export; --xla_decode is refused (it would compile without bound). Batches of up to 8
sentences (with --int8_weights, up to 128) are searched by one XLA computation per
bucket, compiled while the export loads (TF Serving: --xla_cpu_compilation_enabled=true);
--noxla_small_batches exports graph-mode searches alone.
"""

import os

from absl import app, flags

from pipelines import cli
from pipelines import flags as pipeline_flags
from pipelines.inference import (
    inference_model_from_flags,
    search_config_from_flags,
    usage_errors,
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
    if FLAGS.xla_decode:
        raise app.UsageError(
            "--xla_decode is for pipelines.translate: an export would compile a program for "
            "every batch size and source length its requests bring, without bound. Exports "
            "compile their buckets at load instead (--xla_small_batches, the default)."
        )
    # translate_nbest returns the whole beam: --nbest plays no part in an export.
    search_config = search_config_from_flags(with_nbest=False)
    loaded = inference_model_from_flags(search_config)
    export_dir = FLAGS.export_dir or os.path.join("saved_models", _default_name(FLAGS.model_dir))
    # The run chooses its exporter: text, ensemble, or token ids for an imported fairseq
    # model that reads pre-tokenised text.
    with usage_errors():
        options = {} if FLAGS.xla_small_batches else {"buckets": None}
        version_dir = loaded.export(export_dir, exporter_options=options)
    print(f"Exported {loaded.checkpoint} to {version_dir}")
    return 0


def _default_name(model_dir):
    """The export's name: the run's base name, an ensemble's joined by "+"."""
    from convs2s_tf.inference.ensembles import split_paths

    names = [os.path.basename(os.path.normpath(path)) for path in split_paths(model_dir)]
    return "+".join(names)


if __name__ == "__main__":
    cli.run(main)
