"""A light TF Serving PredictionService (Predict, GetModelMetadata) over gRPC.

It speaks TF Serving's own protocol (`tensorflow_serving.apis`), so clients written for
`tensorflow_model_server` work unchanged; it stands in for that server in development
and tests where TF Serving is not installed. It serves the newest version under a
model base path, like TF Serving.
"""

from __future__ import annotations

import os
from typing import Any

import grpc
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    model_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from convs2s_tf.export.saved_model import latest_version_dir
from convs2s_tf.export.warmup import replay_warmup_requests
from convs2s_tf.serving.request_tensors import RequestError, RequestLimits, input_array

DEFAULT_SIGNATURE = "serving_default"


class ServableModel:
    """The newest SavedModel version under `base_path`, loaded for prediction.

    Like TF Serving with its default `--enable_model_warmup`, loading replays the
    version's warm-up requests (`assets.extra/tf_serving_warmup_requests`), so that no
    client request waits for a compiled bucket's XLA compilation.

    Args:
        name: The model name clients put in `ModelSpec.name`.
        base_path: The directory holding `<version>/` SavedModels.
        warmup_threads: Warm-up requests replayed at once (None: one per CPU core); 0
            replays none.

    Attributes:
        warmup_seconds: How long the warm-up took (0.0 without one).
    """

    def __init__(self, name: str, base_path: str, warmup_threads: int | None = None) -> None:
        import tensorflow_text  # noqa: F401 (registers the SentencePiece ops of the export)

        if warmup_threads is not None and warmup_threads < 0:
            raise ValueError(f"warmup_threads must be >= 0, got {warmup_threads}.")
        self.name = name
        self.path = latest_version_dir(base_path)
        self.version = int(os.path.basename(self.path))
        self.loaded = tf.saved_model.load(self.path)
        self.warmup_seconds = (
            0.0
            if warmup_threads == 0
            else replay_warmup_requests(self.loaded, self.path, warmup_threads)
        )
        self.signatures = dict(self.loaded.signatures)
        proto = saved_model_pb2.SavedModel()
        with tf.io.gfile.GFile(os.path.join(self.path, "saved_model.pb"), "rb") as f:
            proto.ParseFromString(f.read())
        self.signature_defs = proto.meta_graphs[0].signature_def


# The gRPC status of a TensorFlow error raised while a request runs: its own code for
# what a client can act on, INTERNAL for the rest (as TF Serving maps them).
_OP_ERROR_CODES = {
    tf.errors.InvalidArgumentError: grpc.StatusCode.INVALID_ARGUMENT,
    tf.errors.ResourceExhaustedError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    tf.errors.OutOfRangeError: grpc.StatusCode.OUT_OF_RANGE,
}


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """Implements Predict and GetModelMetadata for one `ServableModel`, each request within
    `limits` (`RequestLimits`)."""

    def __init__(self, servable: ServableModel, limits: RequestLimits | None = None) -> None:
        self.servable = servable
        self.limits = limits or RequestLimits()

    def _check_model(self, model_spec: Any, context: grpc.ServicerContext) -> None:
        if model_spec.name != self.servable.name:
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"Servable not found for request: model {model_spec.name!r} (this server "
                f"serves {self.servable.name!r}).",
            )
        if model_spec.HasField("version") and model_spec.version.value != self.servable.version:
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"Servable not found for request: {model_spec.name!r} version "
                f"{model_spec.version.value} (serving version {self.servable.version}).",
            )

    def _response_spec(self, signature_name: str) -> Any:
        spec = model_pb2.ModelSpec(name=self.servable.name, signature_name=signature_name)
        spec.version.value = self.servable.version
        return spec

    def Predict(
        self, request: predict_pb2.PredictRequest, context: grpc.ServicerContext
    ) -> predict_pb2.PredictResponse:
        self._check_model(request.model_spec, context)
        signature_name = request.model_spec.signature_name or DEFAULT_SIGNATURE
        function = self.servable.signatures.get(signature_name)
        if function is None:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"Serving signature key {signature_name!r} not found; available: "
                f"{', '.join(sorted(self.servable.signatures))}.",
            )
        expected = function.structured_input_signature[1]
        missing = sorted(set(expected) - set(request.inputs))
        unexpected = sorted(set(request.inputs) - set(expected))
        if missing or unexpected:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Signature {signature_name!r} takes inputs {sorted(expected)}; missing "
                f"{missing}, unexpected {unexpected}.",
            )
        inputs = {}
        try:
            for key, spec in expected.items():
                value = input_array(key, request.inputs[key], spec, self.limits)
                inputs[key] = tf.constant(value, dtype=spec.dtype)
        except RequestError as error:
            context.abort(getattr(grpc.StatusCode, error.code), str(error))
        try:
            outputs = function(**inputs)
        except tf.errors.OpError as error:
            code = _OP_ERROR_CODES.get(type(error), grpc.StatusCode.INTERNAL)
            context.abort(code, error.message)
        wanted = list(request.output_filter) or list(outputs)
        unknown = sorted(set(wanted) - set(outputs))
        if unknown:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"output_filter names unknown outputs {unknown}; available: {sorted(outputs)}.",
            )
        response = predict_pb2.PredictResponse(model_spec=self._response_spec(signature_name))
        for key in wanted:
            response.outputs[key].CopyFrom(tf.make_tensor_proto(np.asarray(outputs[key])))
        return response

    def GetModelMetadata(
        self,
        request: get_model_metadata_pb2.GetModelMetadataRequest,
        context: grpc.ServicerContext,
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        self._check_model(request.model_spec, context)
        if list(request.metadata_field) not in ([], ["signature_def"]):
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "Only metadata_field 'signature_def' is supported.",
            )
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for name, signature_def in self.servable.signature_defs.items():
            if not name.startswith("__"):
                signature_map.signature_def[name].CopyFrom(signature_def)
        response = get_model_metadata_pb2.GetModelMetadataResponse(
            model_spec=self._response_spec("")
        )
        response.metadata["signature_def"].Pack(signature_map)
        return response


def set_op_parallelism(intra_op: int = 0, inter_op: int = 0) -> tuple[int, int]:
    """Sizes TensorFlow's thread pools as TF Serving's `--tensorflow_intra_op_parallelism`
    and `--tensorflow_inter_op_parallelism` do; 0 keeps TensorFlow's default (every core).

    One intra-op thread gives each search one core, so that concurrent requests do not
    contend for both (docs/serving.md). Call it before the model loads: TensorFlow fixes
    its pools when it first runs an operation.

    Returns:
        `(intra_op, inter_op)` as TensorFlow now reports them (0: its default).

    Raises:
        ValueError: A size below 0.
        RuntimeError: TensorFlow has already run an operation in this process.
    """
    for name, value in (("intra_op", intra_op), ("inter_op", inter_op)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}.")
    threading_config = tf.config.threading
    if intra_op != threading_config.get_intra_op_parallelism_threads():
        threading_config.set_intra_op_parallelism_threads(intra_op)
    if inter_op != threading_config.get_inter_op_parallelism_threads():
        threading_config.set_inter_op_parallelism_threads(inter_op)
    return (
        threading_config.get_intra_op_parallelism_threads(),
        threading_config.get_inter_op_parallelism_threads(),
    )
