"""A client's call of a translation server's Predict (TF Serving's or `pipelines.serve`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def predict(
    stub: Any,
    model_name: str,
    texts: Sequence[str | bytes],
    signature_name: str = "serving_default",
    timeout: float = 30.0,
) -> dict[str, np.ndarray]:
    """Sends one PredictRequest with `texts` as the `text` input through `stub` (a
    `PredictionServiceStub`); returns the outputs as numpy arrays.

    Raises:
        grpc.RpcError: The server refused or failed the request.
    """
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(list(texts), dtype=tf.string))
    response = stub.Predict(request, timeout=timeout)
    return {key: tf.make_ndarray(value) for key, value in response.outputs.items()}
