"""Serves a SavedModel as TF Serving does: its gRPC protocol (Predict, GetModelMetadata,
GetModelStatus) with the standard gRPC health service, its REST API, and a page that
translates for a person.

    python -m pipelines.serve --model_base_path=saved_models/multi30k_en_de \\
        --model_name=multi30k_en_de [--port=8500] [--rest_api_port=8501] [--host=127.0.0.1]

A light stand-in for `tensorflow_model_server` where TF Serving is not installed: the
same protocols, the newest version under --model_base_path (polled; a new version is
warmed up before it takes traffic), bounded requests and load, TensorFlow's thread pools
sized by TF Serving's own flags. Binds 127.0.0.1 unless --host says otherwise; stops
cleanly on SIGTERM.
"""

import os

from absl import app, flags, logging

from pipelines import cli
from pipelines import flags as pipeline_flags

flags.DEFINE_string("model_base_path", None, "Directory holding <version>/ SavedModels.")
flags.DEFINE_string("model_name", None, "Model name clients put in ModelSpec.name.")
flags.DEFINE_string("host", "127.0.0.1", "Address to bind (127.0.0.1: this machine only).")
flags.DEFINE_integer("port", 8500, "gRPC port (TF Serving's default is 8500; 0: any free).")
flags.DEFINE_integer(
    "rest_api_port",
    0,
    "Port of TF Serving's REST API and the translation page at / (0: no REST, as TF "
    "Serving's flag of the same name).",
    lower_bound=0,
)
flags.DEFINE_integer(
    "rest_api_timeout_in_ms",
    30000,
    "A REST request's deadline, as TF Serving's flag of the same name.",
    lower_bound=1,
)
flags.DEFINE_integer(
    "max_concurrent_requests",
    4,
    "Predict requests searched at once (over gRPC and REST together).",
    lower_bound=1,
)
flags.DEFINE_integer(
    "max_queued_requests",
    4,
    "Predict requests that may wait for a turn; beyond them and the running ones a "
    "request is refused at once with RESOURCE_EXHAUSTED (HTTP 429). A longer queue makes "
    "admitted requests outwait their deadlines under overload.",
    lower_bound=0,
)
flags.DEFINE_integer(
    "search_part_size",
    128,
    "Sentences searched at once: a larger request is searched in parts, and one whose "
    "client has gone or whose deadline has passed stops at the next part.",
    lower_bound=1,
)
flags.DEFINE_float(
    "file_system_poll_wait_seconds",
    1.0,
    "Seconds between polls of --model_base_path for a newer version, loaded and warmed "
    "up before it takes traffic (TF Serving's flag; 0: no polling).",
    lower_bound=0.0,
)
flags.DEFINE_float(
    "shutdown_grace_seconds",
    5.0,
    "On SIGTERM, seconds requests in flight have to finish before they are cancelled; the "
    "process exits within this and 5 more.",
    lower_bound=0.0,
)
flags.DEFINE_integer(
    "max_batch_size",
    1024,
    "Sentences one request may carry (a request declaring more is refused with "
    "INVALID_ARGUMENT before anything is built); 1,024 sentences at beam 5 are seconds of "
    "work on 2 cores.",
    lower_bound=1,
)
flags.DEFINE_integer(
    "max_sequence_length",
    1024,
    "Token ids a row of a token-ids request may carry (the model's positions).",
    lower_bound=1,
)
flags.DEFINE_integer(
    "warmup_threads",
    None,
    "Warm-up requests replayed at once while the model loads, before the server listens, "
    "as TF Serving replays them (default: one per CPU core; 0: none, so that the first "
    "requests compile the buckets).",
    lower_bound=0,
)
flags.DEFINE_integer(
    "tensorflow_intra_op_parallelism",
    0,
    "Threads one operation may use, as TF Serving's flag of the same name (0: TensorFlow's "
    "default, every core; 1: each request's search on one core, for concurrent requests).",
    lower_bound=0,
)
flags.DEFINE_integer(
    "tensorflow_inter_op_parallelism",
    0,
    "Operations run at once, as TF Serving's flag of the same name (0: TensorFlow's default).",
    lower_bound=0,
)
flags.mark_flags_as_required(["model_base_path", "model_name"])
FLAGS = flags.FLAGS
# The shared flags are defined too so that an experiment's flagfile is accepted; the
# flags above, defined here, are this pipeline's key flags.
pipeline_flags.declare_key_flags()


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    from convs2s_tf.serving import (
        ModelApi,
        RequestGate,
        RequestLimits,
        ServableModel,
        ServedVersions,
        create_server,
        serve_until_signal,
        set_op_parallelism,
    )

    # Before the model loads: TensorFlow fixes its thread pools when it first runs.
    intra_op, inter_op = set_op_parallelism(
        FLAGS.tensorflow_intra_op_parallelism, FLAGS.tensorflow_inter_op_parallelism
    )
    # A missing --model_base_path (FileNotFoundError) is reported by pipelines.cli.
    servable = ServableModel(FLAGS.model_name, FLAGS.model_base_path, FLAGS.warmup_threads)
    api = ModelApi(
        ServedVersions(servable, FLAGS.model_base_path, FLAGS.warmup_threads),
        RequestLimits(FLAGS.max_batch_size, FLAGS.max_sequence_length),
        RequestGate(FLAGS.max_concurrent_requests, FLAGS.max_queued_requests),
        FLAGS.search_part_size,
    )
    running = create_server(
        api,
        FLAGS.host,
        FLAGS.port,
        rest_api_port=FLAGS.rest_api_port or None,
        rest_api_timeout_seconds=FLAGS.rest_api_timeout_in_ms / 1000,
        poll_seconds=FLAGS.file_system_poll_wait_seconds,
    )
    # One parseable line, for scripts and tests that start the server.
    rest = f", REST on {FLAGS.host}:{running.rest.port}" if running.rest else ""
    gate = api.gate
    print(
        f"Serving {servable.name} version {servable.version} on {FLAGS.host}:{running.port}"
        f"{rest}, {gate.max_in_flight} searches at once and {gate.max_queued} queued "
        f"(intra-op threads: {intra_op or 'default'}, "
        f"inter-op threads: {inter_op or 'default'})",
        flush=True,
    )
    logging.info(
        "Serving %s from %s (warm-up %.1f s)", servable.name, servable.path, servable.warmup_seconds
    )
    if not serve_until_signal(running, FLAGS.shutdown_grace_seconds):
        # A search part TensorFlow cannot interrupt still runs; its answer has no reader.
        print("Server stopped (a cancelled search was still running).", flush=True)
        os._exit(0)
    print("Server stopped.", flush=True)
    return 0


if __name__ == "__main__":
    cli.run(main)
