"""TF Serving's ModelService.GetModelStatus over gRPC."""

from __future__ import annotations

import grpc
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

from convs2s_tf.serving.model_api import ModelApi
from convs2s_tf.serving.request_tensors import RequestError


class ModelStatusServicer(model_service_pb2_grpc.ModelServiceServicer):
    """Answers GetModelStatus as TF Serving does: the serving version, AVAILABLE; NOT_FOUND
    for another model, version or a label.

    Args:
        api: The server's `ModelApi`.
    """

    def __init__(self, api: ModelApi) -> None:
        self.api = api

    def GetModelStatus(
        self, request: get_model_status_pb2.GetModelStatusRequest, context: grpc.ServicerContext
    ) -> get_model_status_pb2.GetModelStatusResponse:
        try:
            return self.api.status(request.model_spec)
        except RequestError as error:
            context.abort(getattr(grpc.StatusCode, error.code), str(error))
