"""Scores translations with sacrebleu (BLEU and chrF, with signatures).

    python -m pipelines.evaluate --flagfile=configs/multi30k_en_de.cfg [--split=test]
    python -m pipelines.evaluate --saved_model=saved_models/multi30k_en_de \\
        --source=test.en --reference=test.de --json

Translates --source (or the prepared --split of --data_dir) with --model_dir's checkpoint
or --saved_model and scores it against --reference (or the split's references).
"""

import json
import os
import sys

from absl import app, flags

from pipelines import flags as pipeline_flags
from pipelines.inference import translator_from_flags

FLAGS = flags.FLAGS
pipeline_flags.define_all_flags()


def _lines(path, what):
    if not os.path.exists(path):
        raise app.UsageError(f"{what} file {path} does not exist.")
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace").splitlines()


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if bool(FLAGS.source) != bool(FLAGS.reference):
        raise app.UsageError("--source and --reference go together.")
    if FLAGS.source:
        source_path, reference_path = FLAGS.source, FLAGS.reference
    else:
        from convs2s_tf.data.prepare import PreparedData

        if not FLAGS.data_dir:
            raise app.UsageError("Give --source and --reference, or --data_dir and --split.")
        source_path, reference_path = PreparedData.load(FLAGS.data_dir).split_paths(FLAGS.split)
    sources = _lines(source_path, "--source")
    references = _lines(reference_path, "--reference")
    if len(sources) != len(references):
        raise app.UsageError(
            f"{source_path} has {len(sources)} lines but {reference_path} has "
            f"{len(references)}; they must pair up."
        )
    from convs2s_tf.evaluation import corpus_scores

    translator = translator_from_flags()
    hypotheses = []
    for start in range(0, len(sources), FLAGS.batch_size):
        batch = sources[start : start + FLAGS.batch_size]
        hypotheses += [h[0][0] for h in translator.translate(batch)]
    scores = corpus_scores(hypotheses, references)
    scores.update(sentences=len(sources), source=source_path, reference=reference_path)
    if FLAGS.json:
        print(json.dumps(scores))
    else:
        print(scores["bleu_text"])
        print(f"BLEU {scores['bleu']:.2f}  {scores['bleu_signature']}")
        print(f"chrF {scores['chrf']:.2f}  {scores['chrf_signature']}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    app.run(main)
