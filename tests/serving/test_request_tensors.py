"""Reading request tensors: every limit checked from the proto's fields before anything is
built, so that what a request declares cannot allocate more than the limits allow."""

import resource

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2

from convs2s_tf.serving.request_tensors import RequestError, RequestLimits, input_array

TEXT = tf.TensorSpec([None], tf.string)
IDS = tf.TensorSpec([None, None], tf.int32)
LIMITS = RequestLimits(max_batch_size=4, max_sequence_length=8)


def _declaring(dtype, dims, **values):
    """A TensorProto of `dtype` declaring `dims`, carrying `values` (its fields)."""
    proto = tensor_pb2.TensorProto(dtype=dtype, **values)
    for size in dims:
        proto.tensor_shape.dim.add(size=size)
    return proto


def test_well_formed_inputs_are_read():
    texts = input_array("text", tf.make_tensor_proto(["A dog.", "Hi"]), TEXT, LIMITS)
    assert texts.tolist() == [b"A dog.", b"Hi"]
    ids = input_array("ids", tf.make_tensor_proto(np.ones([2, 3], np.int32)), IDS, LIMITS)
    assert ids.shape == (2, 3)


@pytest.mark.parametrize(
    "proto, spec, message",
    [
        (tensor_pb2.TensorProto(), TEXT, "Input 'x' has no dtype."),
        (tf.make_tensor_proto([1, 2], dtype=tf.int32), TEXT, "must be string, got int32"),
        (tf.make_tensor_proto([["a"]]), TEXT, "must have rank 1, got shape [1, 1]"),
        (_declaring(types_pb2.DT_STRING, [0]), TEXT, "is an empty batch"),
        (_declaring(types_pb2.DT_STRING, [-1], string_val=[b"a"]), TEXT, "declares shape [-1]"),
        (
            tf.make_tensor_proto(["a"] * 5),
            TEXT,
            "holds 5 sentences; this server takes at most 4 a request (max_batch_size)",
        ),
        (
            tf.make_tensor_proto(np.ones([1, 9], np.int32)),
            IDS,
            "rows of 9 ids; this server takes at most 8 (max_sequence_length)",
        ),
        (
            _declaring(types_pb2.DT_STRING, [3], string_val=[b"a"]),
            TEXT,
            "declares shape [3] (3 values) but carries 1",
        ),
        (
            _declaring(types_pb2.DT_INT32, [2, 2], tensor_content=b"\0" * 12),
            IDS,
            "declares shape [2, 2] (4 values) but carries 3",
        ),
    ],
)
def test_malformed_or_oversized_inputs_are_refused_naming_the_input(proto, spec, message):
    with pytest.raises(RequestError, match="Input 'x'") as error:
        input_array("x", proto, spec, LIMITS)
    assert message in str(error.value) and error.value.code == "INVALID_ARGUMENT"


def test_a_huge_declared_shape_is_refused_before_anything_is_built():
    # ~30 bytes declaring a billion strings, and ids declaring 10^10 with no values: what
    # tf.make_ndarray would build (repeating the last value) is never built, even where
    # the limits allow that many rows.
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    limits = RequestLimits(max_batch_size=10**9, max_sequence_length=10**5)
    for proto, spec, message in (
        (_declaring(types_pb2.DT_STRING, [10**9], string_val=[b"x"]), TEXT, "but carries 1"),
        (_declaring(types_pb2.DT_INT32, [10**5, 10**5]), IDS, "but carries 0"),
    ):
        with pytest.raises(RequestError, match=message):
            input_array("x", proto, spec, limits)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB


def test_limits_are_positive():
    with pytest.raises(ValueError, match="max_batch_size must be >= 1"):
        RequestLimits(max_batch_size=0)
