"""Translation speed on Multi30k test_2016_flickr (1,000 sentences).

    python -m benchmarks.decode_speed [--model_dir=runs/multi30k_en_de]
        [--saved_model=saved_models/multi30k_en_de] [--batch_size=128]
        [--variants=float32,float32_xla,bfloat16,bfloat16_xla]

For every variant (compute dtype, decoder step XLA-compiled or not), from the
checkpoint (in-process `TranslationModule`, the same functions an export holds):
sentences/s for greedy and beam 5 at --batch_size, ms per sentence at batch 1 (beam 5,
mean over the whole set),
and the beam-5 BLEU, so a faster variant's quality is in sight. Once, at beam 5: the
incremental search against one that recomputes the whole prefix every step. Then the
same through exported SavedModels (`serving_default`): one per --saved_model_variants,
exported to a temporary directory, and --saved_model if given. Batches are the test
set in its own order (no sorting by length). The last line is JSON: per-variant
numbers, and `sentences_per_sec_beam5`, `sentences_per_sec_greedy` and
`latency_ms_batch1` of the best variant for each, with the variant named.
"""

import json
import os
import tempfile
import time

from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_VARIANTS = ["float32", "float32_xla", "bfloat16", "bfloat16_xla"]
flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_string("saved_model", None, "Also measure this SavedModel (base or version dir).")
flags.DEFINE_integer("batch_size", 128, "Sentences per batch for throughput.")
flags.DEFINE_integer(
    "latency_sentences", 0, "Sentences timed one at a time (0: all of them, the mean over the set)."
)
flags.DEFINE_integer(
    "recompute_sentences", 0, "Sentences for the recompute comparison (0: all of them)."
)
flags.DEFINE_list("variants", _VARIANTS, f"Checkpoint variants, of {_VARIANTS}.")
flags.DEFINE_list(
    "saved_model_variants",
    ["float32", "float32_xla", "bfloat16", "bfloat16_xla"],
    "Variants exported and measured as SavedModels (empty: none).",
)
FLAGS = flags.FLAGS


def _throughput(translate, sentences, batch_size, warm_up_all=False):
    """Sentences/s over all `sentences`, and the translations.

    `warm_up_all` translates everything once before timing: an XLA step compiles once
    per batch size and source-length bucket, which a server pays once, not per request.
    """
    for begin in range(0, len(sentences) if warm_up_all else 1, batch_size):
        translate(sentences[begin : begin + batch_size])
    outputs = []
    start = time.perf_counter()
    for begin in range(0, len(sentences), batch_size):
        outputs.extend(translate(sentences[begin : begin + batch_size]))
    return len(sentences) / (time.perf_counter() - start), outputs


def _latency_ms(translate, sentences):
    # Warm up on every sentence first: with XLA, each source-length bucket compiles once.
    for sentence in sentences:
        translate([sentence])
    start = time.perf_counter()
    for sentence in sentences:
        translate([sentence])
    return 1000.0 * (time.perf_counter() - start) / len(sentences)


def _parse_variant(variant):
    dtype, _, xla = variant.partition("_")
    if dtype not in ("float32", "bfloat16") or xla not in ("", "xla"):
        raise app.UsageError(f"Unknown variant {variant!r}; use {_VARIANTS}.")
    return dtype, xla == "xla"


def main(argv):
    del argv
    import tensorflow as tf

    from convs2s_tf.data.pipeline import make_eval_dataset  # noqa: F401 (registers ops)
    from convs2s_tf.data.prepare import PreparedData
    from convs2s_tf.decoding import SearchConfig
    from convs2s_tf.decoding.recompute_search import recompute_beam_search
    from convs2s_tf.evaluation import corpus_scores
    from convs2s_tf.export import TranslationModule, export_translator, latest_version_dir
    from convs2s_tf.inference import open_saved_model
    from convs2s_tf.runs import RunDirectory, load_trained_model

    search = SearchConfig(max_len_a=1.2, max_len_b=10)
    model, tokenizer, checkpoint, run_config = load_trained_model(FLAGS.model_dir)
    data_dir = RunDirectory(FLAGS.model_dir).data_dir(run_config)
    source_path, reference_path = PreparedData.load(data_dir).split_paths("test")
    with open(source_path, encoding="utf-8") as f:
        sentences = f.read().splitlines()
    with open(reference_path, encoding="utf-8") as f:
        references = f.read().splitlines()
    print(f"{len(sentences)} test sentences; checkpoint {checkpoint}", flush=True)
    results = {"batch_size": FLAGS.batch_size, "sentences": len(sentences)}

    def text_translate(module):
        def translate(batch):
            output = module.translate(tf.constant(batch))
            return [t.decode("utf-8") for t in output["translation"].numpy()]

        return translate

    models = {"float32": model}
    for variant in FLAGS.variants:
        dtype, xla = _parse_variant(variant)
        if dtype not in models:
            models[dtype] = load_trained_model(FLAGS.model_dir, compute_dtype=dtype)[0]
        for beam, name in ((1, "greedy"), (5, "beam5")):
            module = TranslationModule(
                models[dtype], tokenizer, search.replace(beam_size=beam, xla=xla)
            )
            rate, translations = _throughput(
                text_translate(module), sentences, FLAGS.batch_size, warm_up_all=xla
            )
            results[f"{variant}_sentences_per_sec_{name}"] = round(rate, 1)
            line = f"checkpoint {variant} {name}: {rate:.1f} sentences/s"
            if beam == 5:
                bleu = corpus_scores(translations, references)["bleu"]
                results[f"{variant}_bleu_beam5"] = round(bleu, 2)
                line += f", BLEU {bleu:.2f}"
            print(line, flush=True)
        latency = _latency_ms(text_translate(module), sentences[: FLAGS.latency_sentences or None])
        results[f"{variant}_latency_ms_batch1"] = round(latency, 2)
        print(f"checkpoint {variant} beam5 batch 1: {latency:.2f} ms/sentence", flush=True)

    subset = sentences[: FLAGS.recompute_sentences or None]
    module = TranslationModule(model, tokenizer, search)
    incremental, _ = _throughput(text_translate(module), subset, FLAGS.batch_size)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def recompute(text):
        return recompute_beam_search(model, module.encode_text(text), search).tokens

    recomputed, _ = _throughput(
        lambda batch: list(recompute(tf.constant(batch))), subset, FLAGS.batch_size
    )
    results["incremental_speedup_beam5"] = round(incremental / recomputed, 2)
    print(
        f"beam5 incremental {incremental:.1f} vs recompute {recomputed:.1f} sentences/s: "
        f"{incremental / recomputed:.1f}x",
        flush=True,
    )

    def measure_saved_model(name, path):
        # Warmed up on the whole set first, as TF Serving warms up from its warm-up file.
        translator = open_saved_model(path)

        def translate(batch):
            return [text for ((text, _),) in translator.translate(batch)]

        rate, translations = _throughput(translate, sentences, FLAGS.batch_size, warm_up_all=True)
        latency = _latency_ms(translate, sentences[: FLAGS.latency_sentences or None])
        bleu = corpus_scores(translations, references)["bleu"]
        results[f"saved_model_{name}_sentences_per_sec_beam{translator.beam_size}"] = round(rate, 1)
        results[f"saved_model_{name}_latency_ms_batch1"] = round(latency, 2)
        results[f"saved_model_{name}_bleu"] = round(bleu, 2)
        print(
            f"SavedModel {name} (beam {translator.beam_size}): {rate:.1f} sentences/s, "
            f"{latency:.2f} ms at batch 1, BLEU {bleu:.2f}",
            flush=True,
        )

    with tempfile.TemporaryDirectory() as export_root:
        for variant in FLAGS.saved_model_variants:
            dtype, xla = _parse_variant(variant)
            if dtype not in models:
                models[dtype] = load_trained_model(FLAGS.model_dir, compute_dtype=dtype)[0]
            version_dir = export_translator(
                models[dtype],
                tokenizer,
                os.path.join(export_root, variant),
                search.replace(xla=xla),
            )
            measure_saved_model(variant, version_dir)
    if FLAGS.saved_model:
        path = FLAGS.saved_model
        try:
            path = latest_version_dir(path)
        except FileNotFoundError:
            pass
        measure_saved_model("given", path)

    for metric, better in (
        ("sentences_per_sec_beam5", max),
        ("sentences_per_sec_greedy", max),
        ("latency_ms_batch1", min),
    ):
        measured = {v: results[f"{v}_{metric}"] for v in FLAGS.variants}
        if measured:
            best = better(measured, key=measured.get)
            results[metric] = measured[best]
            results[f"{metric}_variant"] = best
    print(json.dumps(results))


if __name__ == "__main__":
    app.run(main)
