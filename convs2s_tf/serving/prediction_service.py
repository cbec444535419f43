"""A light TF Serving PredictionService (Predict, GetModelMetadata) over gRPC.

It speaks TF Serving's own protocol (`tensorflow_serving.apis`), so clients written for
`tensorflow_model_server` work unchanged; it stands in for that server in development
and tests where TF Serving is not installed. It serves the newest version under a
model base path, like TF Serving.
"""

from __future__ import annotations

import grpc
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from convs2s_tf.serving.model_api import ModelApi, response_spec
from convs2s_tf.serving.request_tensors import RequestError, input_array


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """TF Serving's Predict and GetModelMetadata over gRPC, for a `ModelApi`."""

    def __init__(self, api: ModelApi) -> None:
        self.api = api

    def Predict(
        self, request: predict_pb2.PredictRequest, context: grpc.ServicerContext
    ) -> predict_pb2.PredictResponse:
        try:
            signature = self.api.signature(request.model_spec)
            self.api.check_input_names(signature, set(request.inputs))
            inputs = {
                key: input_array(key, request.inputs[key], spec, self.api.limits)
                for key, spec in signature.inputs.items()
            }
            outputs = self.api.predict(
                signature, inputs, context, list(request.output_filter) or None
            )
        except RequestError as error:
            context.abort(getattr(grpc.StatusCode, error.code), str(error))
        response = predict_pb2.PredictResponse(
            model_spec=response_spec(signature.servable, signature.name)
        )
        for key, value in outputs.items():
            response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
        return response

    def GetModelMetadata(
        self,
        request: get_model_metadata_pb2.GetModelMetadataRequest,
        context: grpc.ServicerContext,
    ) -> get_model_metadata_pb2.GetModelMetadataResponse:
        if list(request.metadata_field) not in ([], ["signature_def"]):
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "Only metadata_field 'signature_def' is supported.",
            )
        try:
            return self.api.metadata(request.model_spec)
        except RequestError as error:
            context.abort(getattr(grpc.StatusCode, error.code), str(error))


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
