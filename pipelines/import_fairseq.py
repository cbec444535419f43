"""Converts a fairseq `fconv` translation checkpoint into a run of this project.

    python -m pipelines.import_fairseq --checkpoint=checkpoint_best.pt \\
        --source_dict=data-bin/dict.de.txt --target_dict=data-bin/dict.en.txt \\
        --output_dir=runs/fconv_iwslt [--sentencepiece_model=spm.model]

Writes OUTPUT_DIR/config.json, the weights in OUTPUT_DIR/best/ and the two dictionaries
(and the SentencePiece model, if given), so that pipelines.translate, pipelines.evaluate
and pipelines.export take --model_dir=OUTPUT_DIR. Without --sentencepiece_model the run
reads and writes space-separated dictionary tokens, as fairseq does; with it, plain
text. Reading the checkpoint needs PyTorch (`pip install torch==2.13.0`).
"""

from absl import app, flags

from pipelines import cli
from pipelines import flags as pipeline_flags

FLAGS = flags.FLAGS
pipeline_flags.declare_key_flags(pipeline_flags.CHECKPOINT, pipeline_flags.IMPORT)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    missing = [
        name
        for name in ("checkpoint", "source_dict", "target_dict", "output_dir")
        if not FLAGS[name].value
    ]
    if missing:
        raise app.UsageError(f"Missing required flags: --{', --'.join(missing)}.")
    from convs2s_tf.interop.fairseq_fconv import convert_checkpoint

    # Missing files and unusable checkpoints or dictionaries (FileNotFoundError,
    # FairseqImportError, DictionaryError) are reported by pipelines.cli.
    result = convert_checkpoint(
        FLAGS.checkpoint,
        FLAGS.source_dict,
        FLAGS.target_dict,
        FLAGS.output_dir,
        sentencepiece_model=FLAGS.sentencepiece_model,
    )
    model = result.run_config["model"]
    print(
        f"Converted {FLAGS.checkpoint} ({result.architecture}: encoder "
        f"{model['encoder_layers']}, decoder {model['decoder_layers']}, vocabularies "
        f"{model['source_vocab_size']}/{model['target_vocab_size']}) to {result.output_dir}"
    )
    return 0


if __name__ == "__main__":
    cli.run(main)
