"""Serving: a TF Serving-compatible gRPC server (PredictionService, ModelService and the
gRPC health service) for development and tests."""

from convs2s_tf.serving.model_service import ModelStatusServicer
from convs2s_tf.serving.prediction_service import (
    PredictionServicer,
    ServableModel,
    set_op_parallelism,
)
from convs2s_tf.serving.request_tensors import RequestError, RequestLimits, input_array
from convs2s_tf.serving.server import (
    PortInUseError,
    RunningServer,
    create_server,
    serve_until_signal,
)

__all__ = [
    "ModelStatusServicer",
    "PortInUseError",
    "PredictionServicer",
    "RequestError",
    "RequestLimits",
    "RunningServer",
    "ServableModel",
    "create_server",
    "input_array",
    "serve_until_signal",
    "set_op_parallelism",
]
