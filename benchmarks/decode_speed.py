"""Translation speed on Multi30k test_2016_flickr (1,000 sentences).

    python -m benchmarks.decode_speed [--model_dir=runs/multi30k_en_de]
        [--saved_model=saved_models/multi30k_en_de] [--batch_size=128]

From the checkpoint (in-process `TranslationModule`, the same functions the export
holds), with the decoder step XLA-compiled and not: sentences/s for greedy and beam 5 at
--batch_size, and ms per sentence at batch 1 (beam 5). Once, at beam 5: the incremental
search against one that recomputes the whole prefix every step. With --saved_model (or
the newest export of the model under saved_models/), the same through `serving_default`.
Ends with one JSON line.
"""

import json
import os
import time

from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_string("saved_model", None, "SavedModel base or version directory (optional).")
flags.DEFINE_integer("batch_size", 128, "Sentences per batch for throughput.")
flags.DEFINE_integer("latency_sentences", 100, "Sentences timed one at a time.")
flags.DEFINE_integer("recompute_sentences", 256, "Sentences for the recompute comparison.")
flags.DEFINE_bool(
    "xla",
    False,
    "Also measure with the decoder step XLA-compiled (off by default: it recompiles per "
    "shape and was seen to exhaust LLVM's memory on this machine).",
)
FLAGS = flags.FLAGS


def _throughput(translate, sentences, batch_size):
    translate(sentences[:batch_size])  # trace and warm up
    start = time.perf_counter()
    for begin in range(0, len(sentences), batch_size):
        translate(sentences[begin : begin + batch_size])
    return len(sentences) / (time.perf_counter() - start)


def _latency_ms(translate, sentences):
    translate(sentences[:1])
    start = time.perf_counter()
    for sentence in sentences:
        translate([sentence])
    return 1000.0 * (time.perf_counter() - start) / len(sentences)


def main(argv):
    del argv
    import tensorflow as tf

    from convs2s_tf.data.pipeline import make_eval_dataset  # noqa: F401 (registers ops)
    from convs2s_tf.data.prepare import PreparedData
    from convs2s_tf.export import TranslationModule
    from convs2s_tf.training.loading import load_trained_model

    model, tokenizer, checkpoint, run_config = load_trained_model(FLAGS.model_dir)
    source_path, _ = PreparedData.load(run_config["data_dir"]).split_paths("test")
    with open(source_path, encoding="utf-8") as f:
        sentences = f.read().splitlines()
    print(f"{len(sentences)} test sentences; checkpoint {checkpoint}", flush=True)
    results = {}

    def module_translate(**options):
        module = TranslationModule(model, tokenizer, max_len_a=1.2, max_len_b=10, **options)
        return module, lambda batch: module.translate(tf.constant(batch))

    for xla in (False, True) if FLAGS.xla else (False,):
        suffix = "_xla" if xla else ""
        for beam, name in ((1, "greedy"), (5, "beam5")):
            _, translate = module_translate(beam_size=beam, jit_compile_step=xla)
            rate = _throughput(translate, sentences, FLAGS.batch_size)
            results[f"sentences_per_sec_{name}{suffix}"] = round(rate, 1)
            print(f"checkpoint {name}{suffix}: {rate:.1f} sentences/s", flush=True)
        _, translate = module_translate(beam_size=5, jit_compile_step=xla)
        latency = _latency_ms(translate, sentences[: FLAGS.latency_sentences])
        results[f"latency_ms_batch1{suffix}"] = round(latency, 2)
        print(f"checkpoint beam5 batch 1{suffix}: {latency:.2f} ms/sentence", flush=True)

    subset = sentences[: FLAGS.recompute_sentences]
    module, translate = module_translate(beam_size=5)
    incremental = _throughput(translate, subset, FLAGS.batch_size)
    from convs2s_tf.decoding import beam_search

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def recompute(text):
        output = beam_search(
            model,
            module.encode_text(text),
            beam_size=5,
            max_len_a=1.2,
            max_len_b=10,
            incremental=False,
        )
        return output.tokens

    recomputed = _throughput(lambda batch: recompute(tf.constant(batch)), subset, FLAGS.batch_size)
    results["incremental_speedup_beam5"] = round(incremental / recomputed, 2)
    print(
        f"beam5 incremental {incremental:.1f} vs recompute {recomputed:.1f} sentences/s: "
        f"{incremental / recomputed:.1f}x",
        flush=True,
    )

    saved_model = FLAGS.saved_model or os.path.join(
        ROOT, "saved_models", os.path.basename(os.path.normpath(FLAGS.model_dir))
    )
    if os.path.isdir(saved_model):
        from convs2s_tf.decoding.translator import Translator
        from convs2s_tf.export import latest_version_dir

        try:
            saved_model = latest_version_dir(saved_model)
        except FileNotFoundError:
            pass
        translator = Translator.from_saved_model(saved_model)
        rate = _throughput(translator.translate, sentences, FLAGS.batch_size)
        latency = _latency_ms(translator.translate, sentences[: FLAGS.latency_sentences])
        results["saved_model_sentences_per_sec"] = round(rate, 1)
        results["saved_model_latency_ms_batch1"] = round(latency, 2)
        results["saved_model_beam_size"] = translator.beam_size
        print(f"SavedModel {saved_model}: {rate:.1f} sentences/s, {latency:.2f} ms at batch 1")
    results.update(batch_size=FLAGS.batch_size, sentences=len(sentences))
    print(json.dumps(results))


if __name__ == "__main__":
    app.run(main)
