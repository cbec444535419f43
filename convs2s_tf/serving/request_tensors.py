"""A PredictRequest's input tensors, read with every limit checked before anything is built.

`tf.make_ndarray` builds the shape a `TensorProto` declares, repeating the last value it
carries to fill it: a 30-byte request declaring a billion strings would build a list of a
billion items before any check could run. `input_array` checks the declared shape
against the signature and the server's `RequestLimits`, and the values the proto carries
against that shape, from the proto's fields alone; only then does it build the array.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2

# The typed value fields of a TensorProto, by dtype (the others carry `tensor_content`).
_VALUE_FIELDS = {
    types_pb2.DT_STRING: "string_val",
    types_pb2.DT_INT32: "int_val",
    types_pb2.DT_INT64: "int64_val",
    types_pb2.DT_FLOAT: "float_val",
}


class RequestError(ValueError):
    """A request the server refuses: `code` names the gRPC status (`grpc.StatusCode`'s
    name, e.g. "INVALID_ARGUMENT"), the message says what to change."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class RequestLimits:
    """What one request may ask of the server.

    Args:
        max_batch_size: Sentences (rows of an input) one request may carry.
        max_sequence_length: Token ids a row of a token-ids input may carry.

    Example:

    >>> RequestLimits(max_batch_size=64).max_batch_size
    64
    """

    max_batch_size: int = 1024
    max_sequence_length: int = 1024

    def __post_init__(self) -> None:
        for name in ("max_batch_size", "max_sequence_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")


def declared_shape(key: str, proto: Any) -> list[int]:
    """The shape `proto` declares for input `key`.

    Raises:
        RequestError: An unknown rank or a negative dimension.
    """
    if proto.tensor_shape.unknown_rank:
        raise RequestError("INVALID_ARGUMENT", f"Input {key!r} declares no shape.")
    dims = [dim.size for dim in proto.tensor_shape.dim]
    if any(size < 0 for size in dims):
        raise RequestError("INVALID_ARGUMENT", f"Input {key!r} declares shape {dims}.")
    return dims


def carried_values(proto: Any) -> int:
    """How many values `proto` carries (in its typed field or its `tensor_content`)."""
    field = _VALUE_FIELDS.get(proto.dtype)
    if proto.tensor_content or field is None:
        itemsize = tf.dtypes.as_dtype(proto.dtype).size
        return len(proto.tensor_content) // itemsize if itemsize else 0
    return len(getattr(proto, field))


def check_limits(key: str, dims: list[int], limits: RequestLimits) -> None:
    """Refuses an empty batch, more rows than `limits.max_batch_size` and longer rows
    than `limits.max_sequence_length`, naming the limit."""
    if dims[0] == 0:
        raise RequestError(
            "INVALID_ARGUMENT", f"Input {key!r} is an empty batch; send at least one element."
        )
    if dims[0] > limits.max_batch_size:
        raise RequestError(
            "INVALID_ARGUMENT",
            f"Input {key!r} holds {dims[0]} sentences; this server takes at most "
            f"{limits.max_batch_size} a request (max_batch_size).",
        )
    if len(dims) > 1 and dims[1] > limits.max_sequence_length:
        raise RequestError(
            "INVALID_ARGUMENT",
            f"Input {key!r} has rows of {dims[1]} ids; this server takes at most "
            f"{limits.max_sequence_length} (max_sequence_length).",
        )


def input_array(key: str, proto: Any, spec: tf.TensorSpec, limits: RequestLimits) -> np.ndarray:
    """The array of input `key` (a `TensorProto`) for a signature input `spec`, built
    only once its dtype, rank, limits and carried values are checked.

    Raises:
        RequestError: INVALID_ARGUMENT naming the input and what is wrong with it.
    """
    if proto.dtype == types_pb2.DT_INVALID:
        raise RequestError("INVALID_ARGUMENT", f"Input {key!r} has no dtype.")
    given = tf.dtypes.as_dtype(proto.dtype)
    if given != spec.dtype:
        raise RequestError(
            "INVALID_ARGUMENT", f"Input {key!r} must be {spec.dtype.name}, got {given.name}."
        )
    dims = declared_shape(key, proto)
    if len(dims) != spec.shape.rank:
        raise RequestError(
            "INVALID_ARGUMENT",
            f"Input {key!r} must have rank {spec.shape.rank}, got shape {dims}.",
        )
    check_limits(key, dims, limits)
    count, carried = math.prod(dims), carried_values(proto)
    if carried != count:
        raise RequestError(
            "INVALID_ARGUMENT",
            f"Input {key!r} declares shape {dims} ({count} values) but carries {carried}.",
        )
    return tf.make_ndarray(proto)
