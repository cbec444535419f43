"""Learns a run's vocabulary shortlist from parallel text (paper section 5.4).

    python -m pipelines.build_shortlist --model_dir=runs/multi30k_en_de \\
        [--shortlist_top_k=20 --shortlist_frequent=500] \\
        [--shortlist_source=train.en --shortlist_target=train.de]

Fits IBM model 1 on the training pairs, segmented as the model segments them, keeps the
`--shortlist_top_k` most probable target pieces of every source piece and the
`--shortlist_frequent` most frequent target pieces, and writes MODEL_DIR/shortlist.npz.
translate, evaluate and export then decode against it with --shortlist. A trained run
learns from its prepared training text; a run imported from fairseq needs the text.
"""

from absl import app, flags

from pipelines import cli
from pipelines import flags as pipeline_flags

FLAGS = flags.FLAGS
pipeline_flags.declare_key_flags(pipeline_flags.RUN, pipeline_flags.SHORTLIST)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.model_dir:
        raise app.UsageError("Missing required flag: --model_dir.")
    from convs2s_tf.shortlist import build_shortlist, shortlist_path

    # Missing runs, unreadable text and unusable shortlists are reported by pipelines.cli.
    shortlist = build_shortlist(
        FLAGS.model_dir,
        k=FLAGS.shortlist_top_k,
        n=FLAGS.shortlist_frequent,
        source_file=FLAGS.shortlist_source,
        target_file=FLAGS.shortlist_target,
        max_pairs=FLAGS.shortlist_max_pairs,
    )
    path = shortlist.save(shortlist_path(FLAGS.model_dir))
    print(
        f"Wrote {path}: {shortlist.k} target pieces per source piece and the "
        f"{shortlist.n} most frequent, learnt from {shortlist.metadata['pairs']:,} pairs "
        f"({shortlist.metadata['source_file']}). Decode against it with --shortlist."
    )
    return 0


if __name__ == "__main__":
    cli.run(main)
