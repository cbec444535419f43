"""Translation speed of a trained run: in process, through exports, behind the server.

    python -m benchmarks.translate_speed [--model_dir=runs/multi30k_en_de] \\
        [--parts=in_process,exports,server] [--variants=float32,float32_xla,...] \\
        [--exports=default,bfloat16,int8] [--saved_model=DIR] [--batch_size=128] \\
        [--latency_sentences=100] [--sentences=0] [--clients=8] [--seconds=60]

On the run's test split, beam 5; batches of --batch_size of the sentences sorted by
length, latency over the first --latency_sentences sent one at a time. `in_process`: the
checkpoint's translator per --variants: greedy and beam-5 sentences/s after an untimed
pass, BLEU, warm batch-1 ms. `exports`: each of --exports (`EXPORTS`) and --saved_model
in a fresh process: import, load (warm-up included), the first request, batch 1 (then
warm), batches (two passes), peak memory, BLEU. `server`: `pipelines.serve` (with
--server_flags) on the default export or --saved_model, --clients threads sending
requests of --sizes sentences (seeded) for --seconds: each status code's count, p50/p99,
sentences/s answered, the server's RSS every 10 s, p99 against queue length x median.
Ends with one JSON line.
"""

import time

_START = time.perf_counter()

import collections  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402

import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarks import (  # noqa: E402
    PYTHON,
    ROOT,
    CommandError,
    TestSplit,
    TreeMemory,
    child_command,
    child_env,
    cpu_description,
    define_child_flags,
    export_seconds,
    last_json,
    main,
    read_lines,
    request_milliseconds,
    run_prepared_data,
    run_timed,
    time_fresh_process,
    translate_in_batches,
)

PARTS = ("in_process", "exports", "server")
VARIANTS = ("float32", "float32_xla", "bfloat16", "bfloat16_xla")
# The exports measured: name -> pipelines.export flags.
EXPORTS = {
    "default": [],
    "no_buckets": ["--noxla_small_batches"],
    "bfloat16": ["--inference_dtype=bfloat16"],
    "int8": ["--int8_weights"],
}


# The phases of one translation, timed from inside one process.
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
    flags.DEFINE_integer("clients", 8, "The server part's concurrent clients.", **define)
    flags.DEFINE_float("seconds", 60.0, "How long they send requests.", **define)
    flags.DEFINE_list("sizes", ["1", "1", "1", "8", "32"], "Sentences a request.", **define)
    flags.DEFINE_float("deadline_seconds", 10.0, "Each request's deadline.", **define)
    flags.DEFINE_list("server_flags", [], "More pipelines.serve flags.", **define)
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
    """The `in_process` part: {variant figures...}."""
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


def _client(address, sentences, options, seed, stop, records):
    """Sends requests until `stop`; appends (status name, seconds, sentences) to `records`."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    from convs2s_tf.serving.client import predict

    chooser, sizes = random.Random(seed), [int(size) for size in options.sizes]
    with grpc.insecure_channel(address) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        while not stop.is_set():
            size = chooser.choice(sizes)
            first = chooser.randrange(max(len(sentences) - size, 1))
            texts, start, code = sentences[first : first + size], time.perf_counter(), "OK"
            try:
                predict(stub, "load", texts, timeout=options.deadline_seconds)
            except grpc.RpcError as error:
                code = error.code().name
            records.append((code, time.perf_counter() - start, len(texts)))
            if code == "RESOURCE_EXHAUSTED":
                stop.wait(0.1)  # as a client's retry policy backs off


def server(options, split, work_dir):
    """The `server` part: `pipelines.serve` on the default export (or --saved_model) under
    --clients concurrent gRPC clients for --seconds; codes, latency, throughput, RSS."""
    saved_model = options.saved_model or os.path.join(work_dir, "exports", "default")
    if not os.path.isdir(saved_model):
        export_seconds(options.model_dir, saved_model)
    command = [*PYTHON, "-m", "pipelines.serve", f"--model_base_path={saved_model}"]
    command += ["--model_name=load", "--port=0", *options.server_flags]
    pipe = dict(stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    process = subprocess.Popen(command, cwd=ROOT, env=child_env(), **pipe)
    banner = process.stdout.readline()
    address = re.search(r"on (127\.0\.0\.1:\d+)", banner)
    queued = re.search(r"and (\d+) queued", banner)
    if not (address and queued):
        process.kill()
        raise CommandError(f"pipelines.serve did not start: {banner!r}")
    stop, records, memory = threading.Event(), [], TreeMemory(process.pid, every=10.0)
    shared = (address[1], split.sources, options)
    clients = [
        threading.Thread(target=_client, args=(*shared, seed, stop, records))
        for seed in range(options.clients)
    ]
    for thread in clients:
        thread.start()
    stop.wait(options.seconds)
    stop.set()
    for thread in clients:
        thread.join()
    rss = [round(sample / 2**20) for sample in memory.stop().samples]
    process.terminate()
    process.wait(timeout=60)
    answered = np.array([seconds for code, seconds, _ in records if code == "OK"] or [np.nan])
    median, p99 = np.percentile(answered * 1000, [50, 99])
    sentences = sum(size for code, _, size in records if code == "OK")
    results = {
        "clients": options.clients,
        "seconds": options.seconds,
        "codes": dict(collections.Counter(code for code, _, _ in records)),
        "p50_ms": round(float(median), 1),
        "p99_ms": round(float(p99), 1),
        "answered_sentences_per_sec": round(sentences / options.seconds, 1),
        "rss_mb": rss,
        "rss_growth_mb": rss[-1] - rss[0],
        "p99_to_queue_times_median": round(float(p99 / (max(int(queued[1]), 1) * median)), 2),
    }
    print(f"server under load: {json.dumps(results)}", flush=True)
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
        if "server" in options.parts:
            line["server"] = server(options, split, work_dir)
    print(json.dumps(line))


if __name__ == "__main__":
    main(define_flags, run)
