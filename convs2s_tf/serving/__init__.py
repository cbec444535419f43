"""Serving: a TF Serving-compatible model server (gRPC PredictionService and ModelService,
the gRPC health service, TF Serving's REST API and a translation page) for development,
tests and small deployments."""

from convs2s_tf.serving.admission import RequestGate
from convs2s_tf.serving.model_api import ModelApi
from convs2s_tf.serving.prediction_service import PredictionServicer, set_op_parallelism
from convs2s_tf.serving.request_tensors import RequestError, RequestLimits, input_array
from convs2s_tf.serving.servable import ServableModel, ServedVersions
from convs2s_tf.serving.server import (
    PortInUseError,
    RunningServer,
    create_server,
    serve_until_signal,
    stop_server,
)

__all__ = [
    "ModelApi",
    "PortInUseError",
    "PredictionServicer",
    "RequestError",
    "RequestGate",
    "RequestLimits",
    "RunningServer",
    "ServableModel",
    "ServedVersions",
    "create_server",
    "input_array",
    "serve_until_signal",
    "set_op_parallelism",
    "stop_server",
]
