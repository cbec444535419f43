"""TF Serving warm-up requests: `assets.extra/tf_serving_warmup_requests` of a version.

TF Serving replays these `PredictionLog` records when it loads a version, so the first
client request does not pay for graph optimisation or an XLA compilation;
`replay_warmup_requests` does the same for a SavedModel loaded in Python.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import tensorflow as tf

from convs2s_tf.cores import available_cores

ASSETS_EXTRA = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"


class WarmupRequest(NamedTuple):
    """One Predict request replayed when the model loads.

    Fields:
        signature_name: The signature called.
        inputs: {input name: `tf.Tensor`}, e.g. `tf.constant(["A dog."], tf.string)`.
    """

    signature_name: str
    inputs: Mapping[str, tf.Tensor]


def write_warmup_requests(
    version_dir: str, model_name: str, requests: Iterable[WarmupRequest]
) -> str:
    """Writes `requests` (`WarmupRequest`s) as the warm-up file of `version_dir`.

    Args:
        version_dir: A SavedModel directory.
        model_name: The name the model is served under (each request's model spec).
        requests: The requests, replayed in order.

    Returns:
        The path written.
    """
    # The serving protos are a dependency of exporting alone.
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    directory = os.path.join(version_dir, ASSETS_EXTRA)
    tf.io.gfile.makedirs(directory)
    path = os.path.join(directory, WARMUP_FILE)
    with tf.io.TFRecordWriter(path) as writer:
        for signature_name, inputs in requests:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature_name)
            )
            for name, tensor in inputs.items():
                request.inputs[name].CopyFrom(
                    tf.make_tensor_proto(tensor.numpy(), dtype=tensor.dtype)
                )
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())
    return path


def read_warmup_requests(version_dir: str) -> list[WarmupRequest]:
    """The `WarmupRequest`s of `version_dir`'s warm-up file, in order ([] without one)."""
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(version_dir, ASSETS_EXTRA, WARMUP_FILE)
    if not tf.io.gfile.exists(path):
        return []
    requests = []
    for record in tf.data.TFRecordDataset(path):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        inputs = {
            name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()
        }
        requests.append(WarmupRequest(request.model_spec.signature_name, inputs))
    return requests


def replay_warmup_requests(loaded: Any, version_dir: str, threads: int | None = None) -> float:
    """Runs `version_dir`'s warm-up requests on its loaded SavedModel, as TF Serving does
    on load, so that every compiled bucket and graph is ready before the first request.

    Args:
        loaded: The SavedModel loaded from `version_dir` (`tf.saved_model.load`).
        version_dir: Its directory.
        threads: Requests replayed at once (None: one per CPU core). Each compiled bucket
            compiles when its first request runs, so on several cores more than one
            thread loads sooner (docs/serving.md); 1 replays them in the file's order, as
            TF Serving does by default.

    Returns:
        The seconds the requests took.
    """
    if threads is None:
        threads = available_cores()
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}.")
    start = time.perf_counter()
    requests = [
        r for r in read_warmup_requests(version_dir) if r.signature_name in loaded.signatures
    ]

    def replay(request: WarmupRequest) -> None:
        loaded.signatures[request.signature_name](**request.inputs)

    # One thread takes the requests in the file's order; list() raises a request's error.
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(replay, requests))
    return time.perf_counter() - start
