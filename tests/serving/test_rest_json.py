"""TF Serving's REST JSON: bodies in the row and columnar formats read into checked
arrays, outputs written as TF Serving writes them."""

import numpy as np
import pytest
import tensorflow as tf

from convs2s_tf.serving.request_tensors import RequestError, RequestLimits
from convs2s_tf.serving.rest_json import request_inputs, response_body

TEXT = {"text": tf.TensorSpec([None], tf.string, name="text")}
IDS = {"source_ids": tf.TensorSpec([None, None], tf.int32, name="source_ids")}
LIMITS = RequestLimits(max_batch_size=4, max_sequence_length=3)


@pytest.mark.parametrize(
    "body, specs, expected, rows",
    [
        ({"instances": ["A dog.", "Zwei"]}, TEXT, [b"A dog.", b"Zwei"], True),
        ({"instances": [{"text": "a"}, {"text": {"b64": "/w=="}}]}, TEXT, [b"a", b"\xff"], True),
        ({"inputs": ["a", "b"]}, TEXT, [b"a", b"b"], False),
        ({"inputs": {"text": ["a"]}}, TEXT, [b"a"], False),
        ({"instances": [[4, 5], [6, 1]]}, IDS, [[4, 5], [6, 1]], True),
        ({"inputs": {"source_ids": [[7, 8, 9]]}}, IDS, [[7, 8, 9]], False),
    ],
)
def test_row_and_columnar_bodies_are_read(body, specs, expected, rows):
    inputs, row_format = request_inputs(body, specs, LIMITS)
    assert row_format == rows
    (array,) = inputs.values()
    assert array.tolist() == expected
    if specs is IDS:
        assert array.dtype == np.int32


@pytest.mark.parametrize(
    "body, specs, message",
    [
        ([], TEXT, "JSON object with 'instances' or 'inputs'"),
        ({"instances": ["a"], "inputs": ["a"]}, TEXT, "'instances' or 'inputs' (one)"),
        ({"instances": []}, TEXT, "'instances' must be a non-empty list"),
        ({"instances": ["a"] * 5}, TEXT, "holds 5 sentences; this server takes at most 4"),
        ({"inputs": ["a"] * 5}, TEXT, "holds 5 sentences; this server takes at most 4"),
        ({"instances": [1]}, TEXT, "must hold strings"),
        ({"instances": [{"b64": "***"}]}, TEXT, "invalid base64"),
        ({"inputs": {"other": ["a"]}}, TEXT, "missing ['text'], unexpected ['other']"),
        ({"inputs": "a"}, TEXT, "must be a list of strings"),
        ({"instances": [[1, 2], [3]]}, IDS, "rows of different lengths [1, 2]"),
        ({"instances": [[1, 2, 3, 4]]}, IDS, "rows of 4 ids; this server takes at most 3"),
        ({"instances": [[1, 2.5]]}, IDS, "must hold integers"),
        ({"instances": [[1, True]]}, IDS, "must hold integers"),
        ({"instances": [[1, 2**40]]}, IDS, "outside int32"),
    ],
)
def test_bad_bodies_are_refused_naming_the_problem(body, specs, message):
    with pytest.raises(RequestError) as error:
        request_inputs(body, specs, LIMITS)
    assert error.value.code == "INVALID_ARGUMENT"
    assert message in str(error.value)


def test_outputs_are_written_as_tf_serving_writes_them():
    outputs = {
        "translation": np.array([b"Ein Hund.", "Zwei M\u00e4nner.".encode()], dtype=object),
        "score": np.array([-0.5, -1.25], dtype=np.float32),
        "raw_bytes": np.array([b"\xff", b"a"], dtype=object),
    }
    rows = response_body(outputs, row_format=True)["predictions"]
    assert rows[1] == {
        "translation": "Zwei M\u00e4nner.",
        "score": -1.25,
        "raw_bytes": {"b64": "YQ=="},
    }
    columns = response_body(outputs, row_format=False)["outputs"]
    assert columns["score"] == [-0.5, -1.25] and columns["raw_bytes"][0] == {"b64": "/w=="}
    single = {"score": outputs["score"]}
    assert response_body(single, True) == {"predictions": [-0.5, -1.25]}
    assert response_body(single, False) == {"outputs": [-0.5, -1.25]}
