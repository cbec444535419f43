"""TF Serving's ModelService.GetModelStatus for the one model a server serves."""

from __future__ import annotations

from typing import Any

import grpc
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

from convs2s_tf.serving.prediction_service import ServableModel

_AVAILABLE = get_model_status_pb2.ModelVersionStatus.AVAILABLE


class ModelStatusServicer(model_service_pb2_grpc.ModelServiceServicer):
    """Answers GetModelStatus as TF Serving does: the served version, AVAILABLE; NOT_FOUND
    for another model or version.

    Args:
        servable: The `ServableModel` the server serves.
    """

    def __init__(self, servable: ServableModel) -> None:
        self.servable = servable

    def GetModelStatus(
        self, request: get_model_status_pb2.GetModelStatusRequest, context: grpc.ServicerContext
    ) -> get_model_status_pb2.GetModelStatusResponse:
        spec: Any = request.model_spec
        served = self.servable
        if spec.name != served.name or (
            spec.HasField("version") and spec.version.value != served.version
        ):
            wanted = spec.name + (
                f" version {spec.version.value}" if spec.HasField("version") else ""
            )
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"Could not find any versions of model {wanted!r} (this server serves "
                f"{served.name!r} version {served.version}).",
            )
        response = get_model_status_pb2.GetModelStatusResponse()
        status = response.model_version_status.add(version=served.version, state=_AVAILABLE)
        status.status.error_code = 0  # OK
        return response
