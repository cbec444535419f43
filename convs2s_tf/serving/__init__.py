"""Serving: a TF Serving-compatible PredictionService for development and tests."""

from convs2s_tf.serving.prediction_service import (
    PortInUseError,
    PredictionServicer,
    ServableModel,
    create_server,
    serve_until_signal,
    set_op_parallelism,
)
from convs2s_tf.serving.request_tensors import RequestError, RequestLimits, input_array

__all__ = [
    "PortInUseError",
    "PredictionServicer",
    "RequestError",
    "RequestLimits",
    "ServableModel",
    "create_server",
    "input_array",
    "serve_until_signal",
    "set_op_parallelism",
]
