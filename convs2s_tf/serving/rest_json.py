"""TF Serving's REST JSON for Predict: a request body's inputs as arrays, checked against
the signature and the server's limits, and outputs as a response body.

A body holds either `instances` (the row format: a list, one item per sentence; an item
is the value of the signature's only input, or an object of named inputs) or `inputs`
(the columnar format: the only input's value, or an object of named values). Strings
are JSON strings, or `{"b64": "..."}` for bytes that are not UTF-8; an output whose name
ends in `_bytes` is written as `{"b64": ...}`, as TF Serving writes it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from convs2s_tf.serving.request_tensors import RequestError, RequestLimits, check_limits


def _invalid(message: str) -> RequestError:
    return RequestError("INVALID_ARGUMENT", message)


def request_inputs(
    body: Any, specs: Mapping[str, tf.TensorSpec], limits: RequestLimits
) -> tuple[dict[str, np.ndarray], bool]:
    """The arrays a Predict body gives each input of a signature, and whether the body
    used the row format.

    Raises:
        RequestError: INVALID_ARGUMENT naming what is wrong: no `instances` or `inputs`
            (or both), an input missing or unexpected, a value of the wrong type, shape
            or size for `limits`.
    """
    if not isinstance(body, dict) or ("instances" in body) == ("inputs" in body):
        raise _invalid("The body must be a JSON object with 'instances' or 'inputs' (one).")
    row_format = "instances" in body
    if row_format:
        columns = _columns_of_rows(body["instances"], list(specs), limits)
    elif isinstance(body["inputs"], dict):  # named inputs
        columns = body["inputs"]
    elif len(specs) == 1:  # the only input's value
        columns = {next(iter(specs)): body["inputs"]}
    else:
        raise _invalid(f"'inputs' must be an object naming the inputs {sorted(specs)}.")
    missing, unexpected = sorted(set(specs) - set(columns)), sorted(set(columns) - set(specs))
    if missing or unexpected:
        raise _invalid(
            f"The signature takes inputs {sorted(specs)}; missing {missing}, unexpected "
            f"{unexpected}."
        )
    return {key: _array(key, columns[key], spec, limits) for key, spec in specs.items()}, row_format


def _columns_of_rows(instances: Any, names: list[str], limits: RequestLimits) -> dict[str, list]:
    if not isinstance(instances, list) or not instances:
        raise _invalid("'instances' must be a non-empty list.")
    if len(instances) > limits.max_batch_size:
        raise _invalid(
            f"'instances' holds {len(instances)} sentences; this server takes at most "
            f"{limits.max_batch_size} a request (max_batch_size)."
        )
    if len(names) == 1 and not all(
        isinstance(item, dict) and names[0] in item for item in instances
    ):
        return {names[0]: instances}
    if not all(isinstance(item, dict) for item in instances):
        raise _invalid(f"Each instance must be an object naming the inputs {sorted(names)}.")
    keys = set(instances[0])
    if any(set(item) != keys for item in instances):
        raise _invalid("Every instance must name the same inputs.")
    return {key: [item[key] for item in instances] for key in keys}


def _array(key: str, value: Any, spec: tf.TensorSpec, limits: RequestLimits) -> np.ndarray:
    """Input `key`'s array for a rank-1 string or rank-2 integer `spec`, the value's
    shape checked against `limits` before its items are read."""
    if spec.shape.rank == 1 and spec.dtype == tf.string:
        if not isinstance(value, list):
            raise _invalid(f"Input {key!r} must be a list of strings.")
        check_limits(key, [len(value)], limits)
        return np.array([_bytes_of(key, item) for item in value], dtype=object)
    if spec.shape.rank == 2 and spec.dtype.is_integer:
        if not isinstance(value, list) or not all(isinstance(row, list) for row in value):
            raise _invalid(f"Input {key!r} must be a list of rows of token ids.")
        widths = {len(row) for row in value}
        check_limits(key, [len(value), max(widths, default=0)], limits)
        if len(widths) > 1:
            raise _invalid(f"Input {key!r} has rows of different lengths {sorted(widths)}.")
        items = [item for row in value for item in row]
        if not all(isinstance(item, int) and not isinstance(item, bool) for item in items):
            raise _invalid(f"Input {key!r} must hold integers.")
        bounds = np.iinfo(spec.dtype.as_numpy_dtype)
        if items and not bounds.min <= min(items) <= max(items) <= bounds.max:
            raise _invalid(f"Input {key!r} holds ids outside {spec.dtype.name}.")
        return np.array(value, dtype=spec.dtype.as_numpy_dtype).reshape(len(value), -1)
    raise _invalid(f"Input {key!r} ({spec.dtype.name}, rank {spec.shape.rank}) has no JSON form.")


def _bytes_of(key: str, item: Any) -> bytes:
    if isinstance(item, str):
        return item.encode("utf-8", "surrogatepass")
    if isinstance(item, dict) and set(item) == {"b64"} and isinstance(item["b64"], str):
        try:
            return base64.b64decode(item["b64"], validate=True)
        except binascii.Error as error:
            raise _invalid(f"Input {key!r} holds invalid base64: {error}.") from error
    raise _invalid(f'Input {key!r} must hold strings (or {{"b64": ...}} objects).')


def response_body(outputs: Mapping[str, np.ndarray], row_format: bool) -> dict[str, Any]:
    """The JSON body answering a Predict: `predictions` (one item per sentence) for the
    row format, `outputs` for the columnar one."""
    values = {key: _json_value(key, array.tolist()) for key, array in outputs.items()}
    if not row_format:
        return {"outputs": next(iter(values.values())) if len(values) == 1 else values}
    if len(values) == 1:
        return {"predictions": next(iter(values.values()))}
    rows = len(next(iter(outputs.values())))
    return {"predictions": [{key: values[key][row] for key in values} for row in range(rows)]}


def _json_value(key: str, value: Any) -> Any:
    if isinstance(value, list):
        return [_json_value(key, item) for item in value]
    if isinstance(value, bytes):
        if key.endswith("_bytes"):
            return {"b64": base64.b64encode(value).decode("ascii")}
        return value.decode("utf-8", "replace")
    return value
