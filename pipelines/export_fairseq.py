"""Writes a run of this project as a fairseq `fconv` checkpoint with its dictionaries.

    python -m pipelines.export_fairseq --model_dir=runs/multi30k_en_de --output_dir=fairseq_model \\
        [--checkpoint=...] [--source_lang=en --target_lang=de]

Writes OUTPUT_DIR/checkpoint_best.pt (fairseq 0.12's format, fairseq's parameter names
and weight-norm layouts), OUTPUT_DIR/dict.SRC.txt and dict.TGT.txt (ids as the model's)
and the run's SentencePiece model, so that fairseq-generate and fairseq-interactive
translate with the same model; the command to do so is printed. The language codes
default to those of the run's prepared data. The inverse of pipelines.import_fairseq;
writing the checkpoint needs PyTorch (`pip install torch==2.13.0`).
"""

import shlex

from absl import app, flags

from pipelines import cli
from pipelines import flags as pipeline_flags

FLAGS = flags.FLAGS
pipeline_flags.declare_key_flags(
    pipeline_flags.RUN,
    pipeline_flags.CHECKPOINT,
    also=("output_dir", "source_lang", "target_lang"),
)


def _interactive_command(result):
    """The fairseq-interactive command line that translates text with the export."""
    words = [
        "fairseq-interactive",
        result.output_dir,
        f"--path={result.checkpoint_path}",
        f"--source-lang={result.source_lang}",
        f"--target-lang={result.target_lang}",
        "--beam=5",
    ]
    if result.sentencepiece_model:
        words += ["--bpe=sentencepiece", f"--sentencepiece-model={result.sentencepiece_model}"]
    return " ".join(shlex.quote(word) for word in words)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    missing = [name for name in ("model_dir", "output_dir") if not FLAGS[name].value]
    if missing:
        raise app.UsageError(f"Missing required flags: --{', --'.join(missing)}.")
    from convs2s_tf.interop.fairseq_export import FairseqExportError, export_run

    try:
        # Missing runs and checkpoints (FileNotFoundError, CheckpointError) are reported by
        # pipelines.cli.
        result = export_run(
            FLAGS.model_dir,
            FLAGS.output_dir,
            checkpoint=FLAGS.checkpoint,
            sentencepiece_model=FLAGS.sentencepiece_model,
            # The run's own languages unless given: the flags' defaults are for new data.
            source_lang=FLAGS.source_lang if FLAGS["source_lang"].present else None,
            target_lang=FLAGS.target_lang if FLAGS["target_lang"].present else None,
        )
    except FairseqExportError as error:
        cli.fail(error)
    print(
        f"Wrote {FLAGS.model_dir} as fairseq {result.architecture} to {result.output_dir} "
        f"(checkpoint_best.pt, dict.{result.source_lang}.txt, dict.{result.target_lang}.txt"
        f"{', sentencepiece.model' if result.sentencepiece_model else ''}). Translate with:\n"
        f"  {_interactive_command(result)}"
    )
    return 0


if __name__ == "__main__":
    cli.run(main)
