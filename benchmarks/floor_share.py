"""The share of the float32 floor each translator reaches, measured in alternation.

    python -m benchmarks.floor_share --model_dir=runs/multi30k_en_de [--rounds=5] \\
        [--saved_model=DIR] [--ctranslate2_model=DIR --ctranslate2_sentencepiece=SPM]

On a host shared with others, the speed of this machine moves by up to half within an
hour, and `benchmarks.compare_fairseq` times its floor minutes away from the searches it
is set against. Here one process loads every translator first, then repeats rounds; each
round times, one right after the other, the float32 floor with the beam selection
(`benchmarks.float32_floor`, the steps counted once), then every translator's batch-1
latency over the first --latency_sentences test sentences (each sentence sent to every
translator in turn, so that the host's drift falls on all alike), then each one's
throughput over all of them sorted by length in batches of --batch_size. A round's share
is the floor's time over the translator's; the medians over rounds are what carries
over. Each round also times the floor of the batches as they are sent at their
searches' own rows (`float32_floor.active_rows`: the batch shrinks as sentences
finish), and its share is reported beside the other (`batch_rows_share`); and the
batch-1 floor at the requests' own shapes (`float32_floor.shapes_batch1_seconds`: the
attention's products and the encoder's at the source positions each sentence has;
`batch1_shapes_share`), and the floor of a whole request as TensorFlow runs one
(`benchmarks.request_floor`: those products and the selection in one compiled program
per request, with the export's tokenization and detokenization around it, called from
Python one sentence at a time as the translators are; `request_floor_batch1_ms`,
`batch1_request_share`), timed with the translators' batch-1 requests, each sentence
sent to it in turn with them.

Translators: the in-process translator of `pipelines.translate` and `evaluate`; the
default export (--saved_model, or a new one written by `pipelines.export`), loaded with
its warm-up as TF Serving loads it; and, with --ctranslate2_model, a CTranslate2 model
(`benchmarks.compare_ctranslate2`'s Transformer), timed against the same floor: a model
that beats this model's floor cannot be matched by any float32 search of this model.
Each first translates one sentence and the longest batch, untimed (as an export's
warm-up requests do).

With --file_batches (the default), each round then times the in-process translator and
the export once more over the same batches as `pipelines.translate` searches a file: one
batch per core, plus one in flight (`benchmarks.file_batches`, a new process each, since
TensorFlow's threads are set before it first runs; its load is not timed); and, before
that, as lone requests in the same process: one batch at a time, each searched one part
of its rows per core (`SearchConfig.parts`). Their translations are compared with the
in-process translator's of the round.
Ends with one JSON line.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from benchmarks.fresh_saved_model import translate_in_batches
from benchmarks.run_files import (
    ROOT,
    export_default,
    index_batches,
    length_order,
    test_sentences,
)

flags.DEFINE_string("model_dir", os.path.join(ROOT, "runs", "multi30k_en_de"), "Trained run.")
flags.DEFINE_string("saved_model", None, "Time this export instead of a new default one.")
flags.DEFINE_integer("rounds", 5, "Rounds of alternation.")
flags.DEFINE_integer("sentences", 0, "Use only the first N test sentences (0: all).")
flags.DEFINE_integer("latency_sentences", 100, "Sentences sent one at a time.")
flags.DEFINE_integer("batch_size", 128, "Sentences per batched request.")
flags.DEFINE_boolean(
    "file_batches", True, "Also time the batches as pipelines.translate searches a file."
)
flags.DEFINE_string("ctranslate2_model", None, "Also time this CTranslate2 model.")
flags.DEFINE_string("ctranslate2_sentencepiece", None, "Its SentencePiece model.")
FLAGS = flags.FLAGS


def _ctranslate2_translator(search_config):
    """The CTranslate2 model of the flags, searching with `search_config`'s beam and
    longest output (fairseq's max_len_b), as this model's translators do."""
    import ctranslate2
    import sentencepiece as spm

    from benchmarks.ctranslate2_text import TextTranslator

    return TextTranslator(
        ctranslate2.Translator(
            FLAGS.ctranslate2_model, device="cpu", inter_threads=1, intra_threads=os.cpu_count()
        ),
        spm.SentencePieceProcessor(model_file=FLAGS.ctranslate2_sentencepiece),
        beam_size=search_config.beam_size,
        max_length=search_config.max_len_b,
        batch_size=FLAGS.batch_size,
    )


def _batch1_milliseconds(requests, sentences):
    """Per name of `requests` ({name: function of a sentence's index}), the mean ms of a
    request over `sentences` indices, each sentence sent to every function in turn so
    that the host's drift falls on all alike."""
    times = {name: [] for name in requests}
    for index in range(sentences):
        for name, request in requests.items():
            start = time.perf_counter()
            request(index)
            times[name].append(1000.0 * (time.perf_counter() - start))
    return {name: statistics.fmean(values) for name, values in times.items()}


def _throughput(translator, ordered):
    """`(sentences/s over ordered in batches of --batch_size, translations)`."""
    start = time.perf_counter()
    translations = translate_in_batches(translator, ordered, FLAGS.batch_size)
    return len(ordered) / (time.perf_counter() - start), translations


def _file_batches(saved_model, output):
    """`benchmarks.file_batches`' JSON line for the in-process translator (`saved_model`
    None) or the export, its translations written to `output`."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.file_batches",
        f"--model_dir={os.path.abspath(FLAGS.model_dir)}",
        f"--batch_size={FLAGS.batch_size}",
        f"--sentences={FLAGS.sentences}",
        f"--output={output}",
    ]
    if saved_model:
        command.append(f"--saved_model={os.path.abspath(saved_model)}")
    result = subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _file_batches_round(saved_model, work_dir, reference):
    """One round's `{figure: value}` of `_file_batches` for both translators; `reference`:
    the in-process translator's translations of the round, in length order."""
    figures = {}
    for name, export in (("in_process", None), ("export", saved_model)):
        output = os.path.join(work_dir, f"{name}_file_batches.txt")
        line = _file_batches(export, output)
        figures[f"{name}_file_batches_sentences_per_sec"] = line["sentences_per_sec"]
        figures[f"{name}_lone_requests_sentences_per_sec"] = line["requests_sentences_per_sec"]
        for kind, path in (("file_batches", output), ("lone_requests", output + ".requests")):
            with open(path, encoding="utf-8") as f:
                translations = f.read().splitlines()
            figures[f"{name}_{kind}_identical"] = (
                sum(a == b for a, b in zip(translations, reference))
                if len(translations) == len(reference)
                else 0
            )
        figures["file_batches_in_flight"] = line["in_flight"]
    return figures


def _median_share(rounds, key, floor_key):
    """The median over `rounds` of `key`'s rate over the round's `floor_key` rate."""
    return round(statistics.median(r[key] / r[floor_key] for r in rounds), 3)


def shares(rounds, names):
    """Per translator, the medians over `rounds` of its figures and of its shares of the
    round's floor (`floor_selection_*`)."""
    summary = {}
    for name in names:
        batch1 = [r[f"{name}_batch1_ms"] for r in rounds]
        batch = [r[f"{name}_batch_sentences_per_sec"] for r in rounds]
        summary[name] = {
            "batch1_ms": round(statistics.median(batch1), 2),
            "batch_sentences_per_sec": round(statistics.median(batch), 2),
            "batch1_share": round(
                statistics.median(
                    r["floor_selection_batch1_ms"] / ms for r, ms in zip(rounds, batch1)
                ),
                3,
            ),
            "batch_share": round(
                statistics.median(
                    rate / r["floor_selection_batch_sentences_per_sec"]
                    for r, rate in zip(rounds, batch)
                ),
                3,
            ),
            "batch1_shapes_share": round(
                statistics.median(
                    r["floor_shapes_selection_batch1_ms"] / ms for r, ms in zip(rounds, batch1)
                ),
                3,
            ),
            "batch1_request_share": round(
                statistics.median(
                    r["request_floor_batch1_ms"] / ms for r, ms in zip(rounds, batch1)
                ),
                3,
            ),
            "batch_rows_share": round(
                statistics.median(
                    rate / r["floor_rows_selection_batch_sentences_per_sec"]
                    for r, rate in zip(rounds, batch)
                ),
                3,
            ),
        }
        for kind in ("file_batches", "lone_requests"):
            key = f"{name}_{kind}_sentences_per_sec"
            if key in rounds[0]:
                summary[name].update(_pass_shares(rounds, name, kind))
    return summary


def _pass_shares(rounds, name, kind):
    """The medians of a `benchmarks.file_batches` pass (`kind`: "file_batches" or
    "lone_requests") of translator `name`, against both batch floors."""
    key = f"{name}_{kind}_sentences_per_sec"
    return {
        f"{kind}_sentences_per_sec": round(statistics.median(r[key] for r in rounds), 2),
        f"{kind}_share": _median_share(rounds, key, "floor_selection_batch_sentences_per_sec"),
        f"{kind}_rows_share": _median_share(
            rounds, key, "floor_rows_selection_batch_sentences_per_sec"
        ),
        f"{kind}_identical": min(r[f"{name}_{kind}_identical"] for r in rounds),
    }


def main(argv):
    del argv
    import tensorflow_text  # noqa: F401

    from benchmarks.float32_floor import sentence_steps, timed_floors
    from benchmarks.request_floor import RequestFloor
    from convs2s_tf.export.translation_module import TranslationModule
    from convs2s_tf.inference import load_inference_model, open_saved_model

    try:
        sources = test_sentences(FLAGS.model_dir, FLAGS.sentences or None)
    except ValueError as error:
        raise app.UsageError(str(error))
    if FLAGS.ctranslate2_model and not FLAGS.ctranslate2_sentencepiece:
        raise app.UsageError("--ctranslate2_model needs --ctranslate2_sentencepiece.")
    first = sources[: FLAGS.latency_sentences]
    order = length_order([len(source) for source in sources])
    ordered = [sources[index] for index in order]
    batches = index_batches(order, FLAGS.batch_size)
    inference = load_inference_model(FLAGS.model_dir)
    beam = inference.search_config.beam_size
    # In corpus order: the first ones are the batch-1 floor's sentences.
    steps = sentence_steps(inference.model, inference.tokenizer, sources, inference.search_config)
    with tempfile.TemporaryDirectory() as work_dir:
        saved_model = FLAGS.saved_model or export_default(
            FLAGS.model_dir, os.path.join(work_dir, "saved_model")
        )
        translators = {
            "in_process": inference.translator(),
            "export": open_saved_model(saved_model),
        }
        if FLAGS.ctranslate2_model:
            translators["ctranslate2"] = _ctranslate2_translator(inference.search_config)
        for translator in translators.values():
            # Untimed, as an export's warm-up: a compiled bucket and the graph path.
            translator.translate(first[:1])
            translator.translate(ordered[-FLAGS.batch_size :])
        first_steps, first_lengths = (values[: len(first)] for values in steps)
        request_floor = RequestFloor(
            inference.model,
            TranslationModule(inference.model, inference.tokenizer, inference.search_config),
            beam,
            int(first_lengths.max()),
        )
        request_floor.warm_up(first, first_steps)  # one compilation per source length
        rounds, outputs = [], {}
        for index in range(FLAGS.rounds):
            figures = timed_floors(
                inference.model,
                *steps,
                len(first),
                FLAGS.batch_size,
                beam,
                batches,
                own_shapes=True,
            )
            batch1 = _batch1_milliseconds(
                {
                    "request_floor": lambda i: request_floor.translate(first[i], first_steps[i]),
                    **{
                        name: lambda i, t=translator: t.translate([first[i]])
                        for name, translator in translators.items()
                    },
                },
                len(first),
            )
            figures["request_floor_batch1_ms"] = round(batch1.pop("request_floor"), 2)
            for name, translator in translators.items():
                rate, outputs[name] = _throughput(translator, ordered)
                figures[f"{name}_batch1_ms"] = round(batch1[name], 2)
                figures[f"{name}_batch_sentences_per_sec"] = round(rate, 2)
            if FLAGS.file_batches:
                figures.update(_file_batches_round(saved_model, work_dir, outputs["in_process"]))
            print(f"round {index + 1}: {json.dumps(figures)}", flush=True)
            rounds.append(figures)
    summary = shares(rounds, translators)
    summary["identical_in_process_export"] = sum(
        a == b for a, b in zip(outputs["in_process"], outputs["export"])
    )
    summary["sentences"] = len(ordered)
    for name in translators:
        figures = summary[name]
        print(
            f"{name}: batch 1 {figures['batch1_ms']:.2f} ms ({figures['batch1_share']:.0%} of "
            f"the floor; {figures['batch1_shapes_share']:.0%} of the floor at the "
            f"requests' shapes; {figures['batch1_request_share']:.0%} of the request "
            f"floor), batch {FLAGS.batch_size} {figures['batch_sentences_per_sec']:.1f} "
            f"sentences/s ({figures['batch_share']:.0%}; "
            f"{figures['batch_rows_share']:.0%} of the floor at the searches' "
            f"rows), medians of {len(rounds)} rounds"
        )
        if "file_batches_share" in figures:
            print(
                f"{name}, one batch per core: {figures['file_batches_sentences_per_sec']:.1f} "
                f"sentences/s ({figures['file_batches_share']:.0%}; "
                f"{figures['file_batches_rows_share']:.0%} of the floor at the searches' rows); "
                f"{figures['file_batches_identical']} of {len(ordered)} translations as in "
                "process"
            )
            print(
                f"{name}, lone requests, one search per core: "
                f"{figures['lone_requests_sentences_per_sec']:.1f} sentences/s "
                f"({figures['lone_requests_share']:.0%}; "
                f"{figures['lone_requests_rows_share']:.0%} of the floor at the searches' rows); "
                f"{figures['lone_requests_identical']} of {len(ordered)} translations as in "
                "process"
            )
    print(json.dumps({"rounds": rounds, "summary": summary}))


if __name__ == "__main__":
    app.run(main)
