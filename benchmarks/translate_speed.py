"""Translation speed of a trained run: in process, through exports, as a whole command.

    python -m benchmarks.translate_speed [--model_dir=runs/multi30k_en_de] \\
        [--parts=in_process,exports,whole_process] [--variants=float32,float32_xla,...] \\
        [--exports=default,bfloat16,int8] [--saved_model=DIR] [--batch_size=128] \\
        [--latency_sentences=100] [--sentences=0] [--repeats=3]

On the run's prepared test split, beam 5; batches of --batch_size from the sentences
sorted by length, latency one sentence a request over the first --latency_sentences.
`in_process`: the checkpoint's translator per --variants (dtype, XLA step or not), greedy
and beam-5 sentences/s after an untimed pass, BLEU, warm batch-1 ms. `exports`: each of
--exports (`pipelines.export` with `EXPORTS`' flags) and --saved_model, in a fresh
process as a server meets it: import, load (warm-up included), the first request, the
batch-1 mean (then warm), batches (first and second pass), peak memory, BLEU.
`whole_process`: the median wall time of --repeats `pipelines.translate` processes for
one sentence and the split, and its phases (import, load, translations) timed in one
process. Ends with one JSON line.
"""

import time

_START = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402

from absl import app, flags  # noqa: E402

from benchmarks import (  # noqa: E402
    ROOT,
    TestSplit,
    child_command,
    cpu_description,
    define_child_flags,
    export_seconds,
    last_json,
    main,
    read_lines,
    request_milliseconds,
    run_prepared_data,
    run_python,
    run_timed,
    time_fresh_process,
    translate_in_batches,
    write_lines,
)

PARTS = ("in_process", "exports", "whole_process")
VARIANTS = ("float32", "float32_xla", "bfloat16", "bfloat16_xla")
# The exports measured: name -> pipelines.export flags.
EXPORTS = {
    "default": [],
    "no_buckets": ["--noxla_small_batches"],
    "bfloat16": ["--inference_dtype=bfloat16"],
    "int8": ["--int8_weights"],
}
# The phases of one translation, timed from inside one process.
_PHASES = """
import json, sys, time
start = time.perf_counter()
import pipelines.translate
from convs2s_tf.inference import open_translator
from convs2s_tf.inference.translator import search_one_batch_per_core
imported = time.perf_counter()
in_flight = search_one_batch_per_core()  # as the command does
translator = open_translator(model_dir=sys.argv[1])
loaded = time.perf_counter()
with open(sys.argv[2], encoding="utf-8") as f:
    lines = f.read().split("\\n")[:-1]
translator.translate(lines[:1])
first = time.perf_counter()
translator.translate(lines[1:2])
second = time.perf_counter()
translator.translate_all(lines, in_flight=in_flight)
done = time.perf_counter()
print(json.dumps({
    "import": imported - start, "load": loaded - imported, "first_translation": first - loaded,
    "second_translation": second - first, "all_lines": done - second,
}))
"""


def define_flags(flag_values=flags.FLAGS):
    define = {"flag_values": flag_values}
    run = os.path.join(ROOT, "runs", "multi30k_en_de")
    flags.DEFINE_string("model_dir", run, "Trained run.", **define)
    flags.DEFINE_list("parts", list(PARTS), f"Parts to measure, of {PARTS}.", **define)
    flags.DEFINE_list("variants", list(VARIANTS), f"In-process variants, of {VARIANTS}.", **define)
    flags.DEFINE_list("exports", ["default", "bfloat16", "int8"], f"Of {list(EXPORTS)}.", **define)
    flags.DEFINE_string("saved_model", None, "Also time this export (base or version).", **define)
    flags.DEFINE_integer("batch_size", 128, "Sentences per batch for throughput.", **define)
    flags.DEFINE_integer("latency_sentences", 100, "Sent one at a time (0: all).", **define)
    flags.DEFINE_integer("sentences", 0, "Translate only the first N test sentences.", **define)
    flags.DEFINE_integer("repeats", 3, "Fresh processes per whole-process figure.", **define)
    flags.DEFINE_list("translate_flags", [], "More pipelines.translate flags.", **define)
    # A fresh export process (what `exports` runs, and `benchmarks.compare` too).
    flags.DEFINE_string("child_saved_model", None, "Time this export in this process.", **define)
    define_child_flags(flag_values)


def export_child(options):
    """A fresh process's figures of an export (`time_fresh_process`'s, the warm-up
    requests' seconds and a second batched pass)."""
    import tensorflow  # noqa: F401
    import tensorflow_text  # noqa: F401

    from convs2s_tf.inference import open_saved_model

    translator, figures = time_fresh_process(
        lambda: open_saved_model(options.child_saved_model), options, _START
    )
    sentences = read_lines(options.throughput_input)
    start = time.perf_counter()
    translate_in_batches(translator, sentences, options.batch_size)
    second_pass = len(sentences) / (time.perf_counter() - start)
    figures.update(
        warmup_seconds=round(getattr(translator, "warmup_seconds", 0.0), 3),
        batch_second_pass_sentences_per_sec=round(second_pass, 2),
    )
    return figures


def time_export(saved_model, split, output, batch_size):
    """`export_child`'s figures of `saved_model` on `split`, from a fresh process."""
    module, export = "benchmarks.translate_speed", f"--child_saved_model={saved_model}"
    return last_json(run_timed(child_command(module, split, output, batch_size, export))[1])


def in_process(options, split):
    """The `in_process` part: {variant figures..., best of each metric}."""
    from convs2s_tf.decoding import SearchConfig
    from convs2s_tf.inference import load_inference_model

    results = {}
    for variant in options.variants:
        dtype, _, xla = variant.partition("_")
        for beam, name in ((1, "greedy"), (5, "beam5")):
            search = SearchConfig(beam_size=beam, dtype=dtype, xla=xla == "xla")
            translator = load_inference_model(options.model_dir, search_config=search).translator()
            translate_in_batches(translator, split.sorted, options.batch_size)  # untimed
            start = time.perf_counter()
            translations = translate_in_batches(translator, split.sorted, options.batch_size)
            rate = len(split.sorted) / (time.perf_counter() - start)
            results[f"{variant}_sentences_per_sec_{name}"] = round(rate, 1)
            print(f"in process {variant} {name}: {rate:.1f} sentences/s", flush=True)
        results[f"{variant}_bleu_beam5"] = split.scores(translations)["bleu"]
        request_milliseconds(translator, split.first)  # each source length compiled once
        times = request_milliseconds(translator, split.first)
        results[f"{variant}_latency_ms_batch1"] = round(sum(times) / len(times), 2)
        print(f"in process {variant} beam5 batch 1: {sum(times) / len(times):.2f} ms", flush=True)
    bests = (("sentences_per_sec_beam5", max), ("sentences_per_sec_greedy", max))
    for metric, better in (*bests, ("latency_ms_batch1", min)):
        measured = {variant: results[f"{variant}_{metric}"] for variant in options.variants}
        if measured:
            best = better(measured, key=measured.get)
            results[metric], results[f"{metric}_variant"] = measured[best], best
    return results


def exports(options, split, work_dir):
    """The `exports` part: {export name: its fresh process's figures}."""
    paths = {}
    for name in options.exports:
        path = os.path.join(work_dir, "exports", name)
        seconds = export_seconds(options.model_dir, path, *EXPORTS[name])
        paths[name] = (path, round(seconds, 2))
    if options.saved_model:
        paths["given"] = (options.saved_model, None)
    results = {}
    for name, (path, seconds) in paths.items():
        output = os.path.join(work_dir, f"{name}.txt")
        figures = time_export(path, split, output, options.batch_size)
        bleu = split.scores(read_lines(output))["bleu"]
        figures.update(export_seconds=seconds, bleu=bleu)
        print(f"export {name} (fresh process): {json.dumps(figures)}", flush=True)
        results[name] = figures
    return results


def whole_process(options, split, work_dir):
    """The `whole_process` part: medians and the phases of one process."""

    def median_seconds(arguments):
        return statistics.median(run_python(*arguments)[0] for _ in range(options.repeats))

    def translate_seconds(lines, name):
        source = write_lines(os.path.join(work_dir, f"{name}.txt"), lines)
        command = ["-m", "pipelines.translate", f"--model_dir={options.model_dir}"]
        output = f"--output={os.path.join(work_dir, 'output.txt')}"
        return median_seconds(command + [f"--input={source}", output, *options.translate_flags])

    one = translate_seconds(split.sources[:1], "one")
    whole = translate_seconds(split.sources, "all")
    all_lines = os.path.join(work_dir, "all.txt")  # what translate_seconds wrote
    phases = last_json(run_python("-c", _PHASES, options.model_dir, all_lines)[1])
    results = {
        "repeats": options.repeats,
        "one_sentence_seconds": round(one, 2),
        "all_lines_seconds": round(whole, 2),
        "in_one_process": {name: round(value, 2) for name, value in phases.items()},
    }
    print(f"pipelines.translate, median of {options.repeats} processes:")
    print(f"  one sentence {one:.2f} s, {len(split.sources):,} lines {whole:.2f} s")
    print("  in one process: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    return results


def run(options):
    """The benchmark with parsed `options` (this module's flags)."""
    if options.child_saved_model:
        print(json.dumps(export_child(options)))
        return
    for name, chosen, known in (
        ("parts", options.parts, PARTS),
        ("variants", options.variants, VARIANTS),
        ("exports", options.exports, EXPORTS),
    ):
        if set(chosen) - set(known):
            raise app.UsageError(f"Unknown --{name} {sorted(set(chosen) - set(known))}.")
    with tempfile.TemporaryDirectory() as work_dir:
        prepared = run_prepared_data(options.model_dir)
        split = TestSplit(prepared, work_dir, options.sentences, options.latency_sentences)
        line = {"cpu": cpu_description(), "sentences": len(split.sources)}
        line.update(batch_size=options.batch_size, latency_sentences=len(split.first))
        print(f"{options.model_dir}: {len(split.sources)} test sentences", flush=True)
        if "in_process" in options.parts:
            line["in_process"] = in_process(options, split)
        if "exports" in options.parts:
            line["exports"] = exports(options, split, work_dir)
        if "whole_process" in options.parts:
            line["whole_process"] = whole_process(options, split, work_dir)
    print(json.dumps(line))


if __name__ == "__main__":
    main(define_flags, run)
