"""Shortlist sizes against BLEU and decoding speed, beside the whole vocabulary.

    python -m benchmarks.shortlist_sizes --model_dir=runs/multi30k_en_de \\
        [--sizes=5:100,10:500,20:500,...] [--latency_sentences=100] [--batch_size=128]

Fits the run's IBM model 1 table once and, for the whole vocabulary and each `K:N` of
--sizes (K targets per source piece, the N most frequent pieces), builds the default
export's translator in process (compiled buckets up to 8 sentences, graph mode above):
validation and test BLEU (beam 5, batches of --batch_size sorted by length; choose on
validation), batch-1 ms over the first --latency_sentences test sentences and batched
sentences/s over the test set (each after a warm-up), and the mean candidate-set size at
batch 1 and at --batch_size. Prints a table naming the CPU, then one JSON line.
"""

import json
import time

import numpy as np
from absl import app, flags

from benchmarks import cpu_description, main, read_lines, request_milliseconds, run_prepared_data

FLAGS = flags.FLAGS


def define_flags(flag_values=flags.FLAGS):
    define = {"flag_values": flag_values}
    flags.DEFINE_string("model_dir", "runs/multi30k_en_de", "Trained run.", **define)
    sizes = ["5:100", "10:100", "10:500", "20:500", "50:500", "20:1000"]
    flags.DEFINE_list("sizes", sizes, "K:N pairs to measure.", **define)
    flags.DEFINE_integer("latency_sentences", 100, "Test sentences sent one at a time.", **define)
    flags.DEFINE_integer("batch_size", 128, "Sentences per batch (BLEU, throughput).", **define)
    flags.DEFINE_enum("inference_dtype", "float32", ["float32", "bfloat16"], "Dtype.", **define)


def _sizes():
    sizes = []
    for item in FLAGS.sizes:
        k, _, n = item.partition(":")
        try:
            sizes.append((int(k), int(n)))
        except ValueError:
            raise app.UsageError(f"--sizes wants K:N pairs, got {item!r}.") from None
    return sizes


def _translator(loaded, shortlist):
    """The default export's searches in process: compiled buckets, graph above them."""
    from convs2s_tf.decoding.compiled_search import SearchBuckets
    from convs2s_tf.export.translation_module import TranslationModule
    from convs2s_tf.inference.text_translators import TextFunctionsTranslator

    model, config = (loaded.model, loaded.tokenizer, loaded.search_config), SearchBuckets()
    module = TranslationModule(*model, config, shortlist)
    functions = {"serving_default": module.translate, "translate_nbest": module.translate_nbest}
    return TextFunctionsTranslator(functions, loaded.search_config.beam_size, module)


def _mean_set_size(shortlist, tokenizer, sentences, batch_size):
    import tensorflow as tf

    from convs2s_tf.inference.translator import length_sorted_batches
    from convs2s_tf.vocabulary import EOS_ID

    ids = tokenizer.encode(tf.constant(sentences)).to_list()
    sizes = [
        len(shortlist.candidate_ids(np.concatenate([ids[i] for i in batch] + [[EOS_ID]])))
        for batch in length_sorted_batches(sentences, batch_size)
    ]
    return float(np.mean(sizes))


def measure(loaded, shortlist, splits):
    """BLEU, speed and set sizes of one shortlist (None: the whole vocabulary)."""
    from convs2s_tf.evaluation.bleu import corpus_scores

    translator = _translator(loaded, shortlist)
    test_sources, test_references = splits["test"]
    result = {}
    translator.translate(test_sources[: FLAGS.batch_size])  # traces the graph path
    start = time.perf_counter()
    hypotheses = translator.translate_all(test_sources, FLAGS.batch_size, in_flight=1)
    rate = len(test_sources) / (time.perf_counter() - start)
    result["batch_sentences_per_second"] = round(rate, 1)
    result["test_bleu"] = round(corpus_scores(hypotheses, test_references)["bleu"], 2)
    valid_sources, valid_references = splits["validation"]
    hypotheses = translator.translate_all(valid_sources, FLAGS.batch_size)
    result["valid_bleu"] = round(corpus_scores(hypotheses, valid_references)["bleu"], 2)
    latency = test_sources[: FLAGS.latency_sentences]
    translator.translate(latency[:1])  # compiles the batch-1 bucket
    result["batch1_ms"] = round(float(np.mean(request_milliseconds(translator, latency))), 2)
    if shortlist is not None:
        result["set_size_batch1"] = _mean_set_size(shortlist, loaded.tokenizer, latency, 1)
        batches = (test_sources, FLAGS.batch_size)
        result["set_size_batch"] = _mean_set_size(shortlist, loaded.tokenizer, *batches)
    return result


def run(options):
    """The benchmark with parsed `options` (this module's flags)."""
    global FLAGS
    FLAGS = options  # the functions above read the options from here
    from convs2s_tf.decoding import SearchConfig
    from convs2s_tf.inference import load_inference_model
    from convs2s_tf.shortlist import build_shortlist

    sizes = _sizes()
    search_config = SearchConfig(dtype=FLAGS.inference_dtype)
    loaded = load_inference_model(FLAGS.model_dir, search_config=search_config)
    data = run_prepared_data(FLAGS.model_dir)
    splits = {
        split: list(map(read_lines, data.split_paths(split))) for split in ("validation", "test")
    }
    start = time.perf_counter()
    most = {"k": max(k for k, _ in sizes), "n": max(n for _, n in sizes)}
    fitted = build_shortlist(FLAGS.model_dir, **most)
    fit_seconds = time.perf_counter() - start
    vocab_size = loaded.model.decoder.vocab_size
    print(f"CPU: {cpu_description()}; dtype {FLAGS.inference_dtype}")
    print(
        f"{FLAGS.model_dir}: target vocabulary {vocab_size:,}; IBM model 1 "
        f"on {fitted.metadata['pairs']:,} pairs in {fit_seconds:.1f} s"
    )
    batch = FLAGS.batch_size
    print(f"K:N       valid  test   batch-1 ms  batch-{batch} sent/s  set@1  set@{batch}")
    rows = []
    for size in [None, *sizes]:
        shortlist = None if size is None else fitted.limited(*size)
        row = dict(k=size and size[0], n=size and size[1], **measure(loaded, shortlist, splits))
        rows.append(row)
        label = "full" if size is None else f"{size[0]}:{size[1]}"
        print(
            f"{label:9} {row['valid_bleu']:6.2f} {row['test_bleu']:6.2f} "
            f"{row['batch1_ms']:10.2f} {row['batch_sentences_per_second']:15.1f} "
            f"{row.get('set_size_batch1', vocab_size):6.0f} "
            f"{row.get('set_size_batch', vocab_size):6.0f}",
            flush=True,
        )
    line = {"model_dir": FLAGS.model_dir, "cpu": cpu_description(), "vocab_size": vocab_size}
    print(json.dumps(dict(line, rows=rows)))


if __name__ == "__main__":
    main(define_flags, run)
