"""What a client may ask of the served model, whatever the transport (gRPC or REST):
which version and signature a request names, and running it within the server's limits.

Every refusal is a `RequestError` carrying the gRPC status TF Serving would answer with;
the gRPC services abort with it, the REST API maps it to TF Serving's HTTP status.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2, model_pb2

from convs2s_tf.serving.admission import RequestContext, RequestGate, check_wanted
from convs2s_tf.serving.batch_parts import predict_in_parts
from convs2s_tf.serving.request_tensors import RequestError, RequestLimits
from convs2s_tf.serving.servable import ServableModel, ServedVersions

DEFAULT_SIGNATURE = "serving_default"
_AVAILABLE = get_model_status_pb2.ModelVersionStatus.AVAILABLE

# The gRPC status of a TensorFlow error raised while a request runs: its own code for
# what a client can act on, INTERNAL for the rest (as TF Serving maps them).
_OP_ERROR_CODES = {
    tf.errors.InvalidArgumentError: "INVALID_ARGUMENT",
    tf.errors.ResourceExhaustedError: "RESOURCE_EXHAUSTED",
    tf.errors.OutOfRangeError: "OUT_OF_RANGE",
}


@dataclasses.dataclass
class Signature:
    """A signature a request names, on the version that will run it.

    Attributes:
        servable: The version.
        name: The signature's name.
        function: The signature's concrete function.
        inputs: Its input specs by name.
    """

    servable: ServableModel
    name: str
    function: Any  # a ConcreteFunction: called with the inputs, returns the outputs
    inputs: Mapping[str, tf.TensorSpec]


class ModelApi:
    """Predict, metadata and status of the one model a server serves.

    Args:
        versions: The `ServedVersions` (the newest version under the base path).
        limits: `RequestLimits` of one request.
        gate: The `RequestGate` bounding requests that run and wait.
        part_size: Sentences searched at once; a larger request runs in parts, its client
            and deadline checked between them.
    """

    def __init__(
        self,
        versions: ServedVersions,
        limits: RequestLimits,
        gate: RequestGate,
        part_size: int = 128,
    ) -> None:
        if part_size < 1:
            raise ValueError(f"part_size must be >= 1, got {part_size}.")
        self.versions = versions
        self.limits = limits
        self.gate = gate
        self.part_size = part_size

    @property
    def name(self) -> str:
        """The model's name."""
        return self.versions.name

    def servable(self, model_spec: Any) -> ServableModel:
        """The version a `ModelSpec` names (the serving one when it names none).

        Raises:
            RequestError: NOT_FOUND for another model, a version not serving, or a label
                (labels come from a model config file, which this server does not read).
        """
        served = self.versions.current
        if model_spec.name != served.name:
            raise RequestError(
                "NOT_FOUND",
                f"Servable not found for request: model {model_spec.name!r} (this server "
                f"serves {served.name!r}).",
            )
        choice = model_spec.WhichOneof("version_choice")
        if choice == "version" and model_spec.version.value != served.version:
            raise RequestError(
                "NOT_FOUND",
                f"Servable not found for request: {model_spec.name!r} version "
                f"{model_spec.version.value} (serving version {served.version}).",
            )
        if choice == "version_label":
            raise RequestError(
                "NOT_FOUND",
                f"Unrecognized servable version label: {model_spec.version_label!r} (this "
                "server has no version labels; name a version or none).",
            )
        return served

    def signature(self, model_spec: Any) -> Signature:
        """The signature a `ModelSpec` names (serving_default when it names none)."""
        servable = self.servable(model_spec)
        name = model_spec.signature_name or DEFAULT_SIGNATURE
        function = servable.signatures.get(name)
        if function is None:
            raise RequestError(
                "FAILED_PRECONDITION",
                f"Serving signature key {name!r} not found; available: "
                f"{', '.join(sorted(servable.signatures))}.",
            )
        return Signature(servable, name, function, function.structured_input_signature[1])

    def check_input_names(self, signature: Signature, given: set[str]) -> None:
        """Refuses a request whose inputs are not the signature's."""
        missing = sorted(set(signature.inputs) - given)
        unexpected = sorted(given - set(signature.inputs))
        if missing or unexpected:
            raise RequestError(
                "INVALID_ARGUMENT",
                f"Signature {signature.name!r} takes inputs {sorted(signature.inputs)}; "
                f"missing {missing}, unexpected {unexpected}.",
            )

    def predict(
        self,
        signature: Signature,
        inputs: Mapping[str, np.ndarray],
        context: RequestContext,
        output_filter: list[str] | None = None,
    ) -> dict[str, np.ndarray]:
        """The signature's outputs for checked `inputs`, once the request has its turn.

        Raises:
            RequestError: The gate is full (RESOURCE_EXHAUSTED), the client went or the
                deadline passed (CANCELLED, DEADLINE_EXCEEDED; checked before each part),
                TensorFlow refused the inputs or failed, or `output_filter` names an
                output the signature lacks.
        """
        outputs_available = signature.function.structured_outputs
        unknown = sorted(set(output_filter or []) - set(outputs_available))
        if unknown:
            raise RequestError(
                "INVALID_ARGUMENT",
                f"output_filter names unknown outputs {unknown}; available: "
                f"{sorted(outputs_available)}.",
            )
        dtypes = {key: spec.dtype for key, spec in signature.inputs.items()}
        with self.gate.admitted(context):
            try:
                outputs = predict_in_parts(
                    signature.function,
                    inputs,
                    dtypes,
                    self.part_size,
                    before_part=lambda: check_wanted(context),
                )
            except tf.errors.OpError as error:
                raise RequestError(
                    _OP_ERROR_CODES.get(type(error), "INTERNAL"), error.message
                ) from error
            except ValueError as error:  # parts that cannot be joined: the export's fault
                raise RequestError("INTERNAL", str(error)) from error
        wanted = output_filter or list(outputs)
        return {key: outputs[key] for key in wanted}

    def metadata(self, model_spec: Any) -> get_model_metadata_pb2.GetModelMetadataResponse:
        """TF Serving's metadata of the version `model_spec` names: its public signatures."""
        servable = self.servable(model_spec)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for name, signature_def in servable.signature_defs.items():
            if not name.startswith("__"):
                signature_map.signature_def[name].CopyFrom(signature_def)
        response = get_model_metadata_pb2.GetModelMetadataResponse(
            model_spec=response_spec(servable, "")
        )
        response.metadata["signature_def"].Pack(signature_map)
        return response

    def status(self, model_spec: Any) -> get_model_status_pb2.GetModelStatusResponse:
        """TF Serving's status of the version `model_spec` names (the serving one when it
        names none): AVAILABLE."""
        servable = self.servable(model_spec)
        response = get_model_status_pb2.GetModelStatusResponse()
        status = response.model_version_status.add(version=servable.version, state=_AVAILABLE)
        status.status.error_code = 0  # OK
        return response


def response_spec(servable: ServableModel, signature_name: str) -> Any:
    """The `ModelSpec` of a response: the model, the version that answered, the signature."""
    spec = model_pb2.ModelSpec(name=servable.name, signature_name=signature_name)
    spec.version.value = servable.version
    return spec
