"""Scores translations with sacrebleu (BLEU and chrF, with signatures).

    python -m pipelines.evaluate --flagfile=configs/multi30k_en_de.cfg [--split=test]
    python -m pipelines.evaluate --saved_model=saved_models/multi30k_en_de \\
        --source=test.en --reference=test.de --json [--output=hypotheses.de]

Translates --source (or the prepared --split of --data_dir) with --model_dir's checkpoint
or --saved_model and scores it against --reference (or the split's references). Files are
read as by training's test score (lines end at "\\n" only; invalid UTF-8 becomes U+FFFD),
so the default flags score a run's test split exactly as pipelines.train did. --output
also writes the hypotheses scored, one per line in corpus order, to inspect or rescore.
"""

import json
import os
import sys

from absl import app, flags

from convs2s_tf.data.text_files import read_lines
from convs2s_tf.inference.translator import search_one_batch_per_core
from pipelines import cli
from pipelines import flags as pipeline_flags
from pipelines.inference import search_config_from_flags, translator_from_flags, usage_errors

FLAGS = flags.FLAGS
pipeline_flags.declare_key_flags(
    pipeline_flags.RUN,
    pipeline_flags.CHECKPOINT,
    pipeline_flags.INFERENCE,
    pipeline_flags.SEARCH,
    pipeline_flags.EVALUATE,
    also=("data_dir", "output"),
)


def _check_exists(path, what):
    if not os.path.isfile(path):
        raise app.UsageError(f"{what} file {path} does not exist.")


def _run_data_dir():
    """The prepared data named by --model_dir's run (the first run of an ensemble), so
    that `--model_dir=RUN --split=test` works from any working directory."""
    if not FLAGS.model_dir:
        return None
    from convs2s_tf.runs import RunDirectory

    run = RunDirectory(FLAGS.model_dir.split(",")[0])
    return run.data_dir(run.read_config())


def _write_hypotheses(hypotheses, path):
    # "\n" only, as the corpus files are read, so line i stays sentence i.
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(hypothesis + "\n" for hypothesis in hypotheses)


def _approx_bleu(data_dir):
    """tensor2tensor's approx BLEU of --model_dir's checkpoint on --split's batches."""
    if FLAGS.source or FLAGS.saved_model or not FLAGS.model_dir or "," in FLAGS.model_dir:
        raise app.UsageError(
            "--approx_bleu scores one --model_dir's checkpoint on a prepared --split "
            "(no --source, --saved_model or ensemble)."
        )
    from convs2s_tf.data.pipeline import make_shard_eval_dataset
    from convs2s_tf.data.prepare import PreparedData
    from convs2s_tf.models.posenet.approx_bleu import approx_bleu
    from convs2s_tf.runs import load_trained_model

    model, _, _, config = load_trained_model(
        FLAGS.model_dir, FLAGS.checkpoint, compute_dtype=FLAGS.inference_dtype
    )
    prepared = PreparedData.load(data_dir)
    batches = make_shard_eval_dataset(
        prepared.shard_paths(FLAGS.split),
        prepared.length_index(FLAGS.split),
        max_tokens=FLAGS.max_tokens,
        max_source_positions=config["model"]["max_source_positions"],
        max_target_positions=config["model"]["max_target_positions"],
    ).dataset
    scores = approx_bleu(model, batches, model.decoder.pad_id)
    return {
        "approx_bleu": scores.per_batch,
        "approx_bleu_unpadded": scores.unpadded,
        "approx_bleu_batches": scores.batches,
    }


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.batch_size < 1:
        raise app.UsageError("--batch_size must be >= 1.")
    # Only the best hypothesis is scored: --nbest plays no part.
    search_config = search_config_from_flags(with_nbest=False)
    if bool(FLAGS.source) != bool(FLAGS.reference):
        raise app.UsageError("--source and --reference go together.")
    data_dir = None
    if FLAGS.source:
        source_path, reference_path = FLAGS.source, FLAGS.reference
    else:
        from convs2s_tf.data.prepare import PreparedData

        data_dir = FLAGS.data_dir or _run_data_dir()
        if not data_dir:
            raise app.UsageError(
                "Give --source and --reference, or --data_dir and --split (a --model_dir "
                "trained here names its own data)."
            )
        source_path, reference_path = PreparedData.load(data_dir).split_paths(FLAGS.split)
    _check_exists(source_path, "--source")
    _check_exists(reference_path, "--reference")
    sources = read_lines(source_path, invalid_utf8="replace")
    references = read_lines(reference_path, invalid_utf8="replace")
    if len(sources) != len(references):
        raise app.UsageError(
            f"{source_path} has {len(sources)} lines but {reference_path} has "
            f"{len(references)}; they must pair up."
        )
    from convs2s_tf.evaluation import corpus_scores

    in_flight = search_one_batch_per_core()
    translator = translator_from_flags(search_config)
    # translate_all, as training's test score: the same batches, so the same BLEU. A
    # search setting a sentence cannot meet (e.g. --min_length beyond its maximum output
    # length) ends the run with the translator's message, which names the flags.
    with usage_errors():
        hypotheses = translator.translate_all(sources, FLAGS.batch_size, in_flight=in_flight)
    if FLAGS.output:
        _write_hypotheses(hypotheses, FLAGS.output)
    scores = corpus_scores(hypotheses, references)
    scores.update(sentences=len(sources), source=source_path, reference=reference_path)
    if FLAGS.approx_bleu:
        scores.update(_approx_bleu(data_dir))
    if FLAGS.json:
        print(json.dumps(scores))
    else:
        print(scores["bleu_text"])
        print(f"BLEU {scores['bleu']:.2f}  {scores['bleu_signature']}")
        print(f"chrF {scores['chrf']:.2f}  {scores['chrf_signature']}")
        print(
            f"BLEU {scores['bleu_lowercase_intl']:.2f}  "
            f"{scores['bleu_lowercase_intl_signature']}  (lowercased, intl tokeniser: "
            "for comparison with papers only)"
        )
        if FLAGS.approx_bleu:
            print(
                f"approx BLEU {scores['approx_bleu']:.2f} (tensor2tensor's: teacher-forced "
                f"argmax on pieces, mean of {scores['approx_bleu_batches']} batches; "
                f"{scores['approx_bleu_unpadded']:.2f} without padding, over the split)"
            )
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    cli.run(main)
