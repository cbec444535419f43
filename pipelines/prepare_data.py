"""Prepares a corpus for training: cleaned text, joint BPE model, vocabulary, summary.

    python -m pipelines.prepare_data --flagfile=configs/multi30k_en_de.cfg \
        [--data_dir=data/multi30k_en_de]

Writes a version folder into --data_dir, published whole (see convs2s_tf.data.prepare);
a re-run with the same corpus and flags does nothing. Prints the summary's headline
figures; the full summary is summary.json in the version folder that
DATA_DIR/fingerprint.json names.
"""

from absl import app

from convs2s_tf.data.prepare import prepare_data
from pipelines import cli
from pipelines import flags as pipeline_flags

FLAGS = pipeline_flags.FLAGS
pipeline_flags.declare_key_flags(pipeline_flags.DATA, pipeline_flags.PREPARE)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    config = pipeline_flags.prepare_config_from_flags()
    # Corpus problems the user can fix (a missing file, unequal line counts, invalid
    # UTF-8, an unavailable dataset) are reported by pipelines.cli in one line.
    result = prepare_data(config, force=FLAGS.force_prepare)
    summary = result.summary
    state = "up to date, nothing done" if result.reused else "prepared"
    print(
        f"{config.data_dir}: {state} ({summary['dataset']} "
        f"{summary['source_lang']}-{summary['target_lang']}, vocab {summary['vocab_size']})"
    )
    for split, figures in summary["splits"].items():
        dropped = ", ".join(f"{rule} {count}" for rule, count in figures["dropped_by_rule"].items())
        print(
            f"  {split}: {figures['pairs_kept']} pairs kept of {figures['pairs_read']} "
            f"(dropped: {dropped}); tokens {figures['source']['tokens']} source, "
            f"{figures['target']['tokens']} target"
        )
    return 0


if __name__ == "__main__":
    cli.run(main)
