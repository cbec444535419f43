"""Serving: a TF Serving-compatible PredictionService for development and tests."""

from convs2s_tf.serving.prediction_service import (
    PredictionServicer,
    ServableModel,
    create_server,
    serve_until_signal,
    set_op_parallelism,
)

__all__ = [
    "PredictionServicer",
    "ServableModel",
    "create_server",
    "serve_until_signal",
    "set_op_parallelism",
]
