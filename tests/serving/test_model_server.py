"""The model server in this process, on loopback, through TF Serving's real gRPC protocol
and its REST API (a real HTTP client): load limits, requests given up, searches in
parts, REST answers and statuses, and new versions picked up as TF Serving does."""

import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from helpers.waiting import wait_for
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from convs2s_tf.serving import (
    ModelApi,
    RequestGate,
    RequestLimits,
    ServableModel,
    ServedVersions,
    create_server,
    stop_server,
)
from convs2s_tf.serving.batch_parts import predict_in_parts
from convs2s_tf.serving.client import predict

SENTENCES = [
    "A dog.",
    "Two men are talking on a bench in the park.",
    "",
    "Ein",
    "Hi!",
    "A b c d e f.",
]


class CountedSignature:
    """A signature that counts its calls and, when `hold` is set, waits at its first call
    until `release` is set (so a test can act while a request is mid-search)."""

    def __init__(self, function):
        self.function = function
        self.structured_input_signature = function.structured_input_signature
        self.structured_outputs = function.structured_outputs
        self.calls = 0
        self.hold = False
        self.started, self.release = threading.Event(), threading.Event()

    def __call__(self, **inputs):
        self.calls += 1
        self.started.set()
        if self.hold:
            self.release.wait(60)
        return self.function(**inputs)


@pytest.fixture(scope="module")
def servable(exported):
    return ServableModel("tiny", str(exported), warmup_threads=0)


@pytest.fixture(scope="module")
def running(servable):
    counted = CountedSignature(servable.signatures["serving_default"])
    servable.signatures = dict(servable.signatures, serving_default=counted)
    api = ModelApi(
        ServedVersions(servable, os.path.dirname(servable.path), 0),
        RequestLimits(max_batch_size=64),
        RequestGate(max_in_flight=1, max_queued=1),
        part_size=4,
    )
    server = create_server(api, port=0, rest_api_port=0)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    server.stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    server.counted = counted
    yield server
    channel.close()
    assert stop_server(server, grace=1)


def _rest(running, path, body=None):
    """(HTTP status, decoded JSON body) of a GET, or of a POST of `body`."""
    data = None if body is None else json.dumps(body).encode()
    url = f"http://127.0.0.1:{running.rest.port}{path}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _hold_slot(gate):
    """Takes one of `gate`'s places from a thread until the returned event is set."""
    release, entered = threading.Event(), threading.Event()

    class Forever:
        def is_active(self):
            return True

        def time_remaining(self):
            return None

        def add_callback(self, callback):
            return True

    def hold():
        with gate.admitted(Forever()):
            entered.set()
            release.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    return release, entered, thread


@pytest.mark.parametrize(
    "signature", ["serving_default", "translate_nbest", "translate_ids", "translate_with_attention"]
)
def test_a_batch_searched_in_parts_answers_as_the_whole_batch(servable, signature):
    function = servable.signatures[signature]
    ((key, spec),) = function.structured_input_signature[1].items()
    if spec.dtype == tf.string:
        inputs = {key: np.array([s.encode() for s in SENTENCES], dtype=object)}
    else:
        ids = [
            [5, 6, 7, 8, 9, 10],
            [11, 1, 1, 1, 1, 1],
            [12, 13, 1, 1, 1, 1],
            [14, 15, 16, 17, 1, 1],
        ]
        inputs = {key: np.array(ids, dtype=np.int32)}
    whole = {k: np.asarray(v) for k, v in function(**{key: tf.constant(inputs[key])}).items()}
    parts = predict_in_parts(function, inputs, {key: spec.dtype}, part_size=2)
    assert set(parts) == set(whole)
    for name, value in whole.items():
        assert parts[name].shape == value.shape, name
        if value.dtype.kind == "f":
            np.testing.assert_allclose(parts[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(parts[name], value, err_msg=name)


def test_rest_answers_as_grpc_in_both_formats(running):
    expected = predict(running.stub, "tiny", SENTENCES)
    status, rows = _rest(running, "/v1/models/tiny:predict", {"instances": SENTENCES})
    assert status == 200
    assert [row["translation"] for row in rows["predictions"]] == [
        text.decode() for text in expected["translation"]
    ]
    version = running.api.versions.current.version
    status, columns = _rest(
        running,
        f"/v1/models/tiny/versions/{version}:predict",
        {"signature_name": "translate_nbest", "inputs": {"text": SENTENCES[:2]}},
    )
    assert status == 200 and len(columns["outputs"]["translations"]) == 2
    assert len(columns["outputs"]["scores"][0]) == 3  # the whole beam
    status, model = _rest(running, "/v1/models/tiny")
    assert status == 200 and model["model_version_status"] == [
        {
            "version": str(version),
            "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""},
        }
    ]
    status, metadata = _rest(running, f"/v1/models/tiny/versions/{version}/metadata")
    assert status == 200 and metadata["model_spec"]["version"] == str(version)
    assert (
        "text"
        in metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]
    )


@pytest.mark.parametrize(
    "path, body, status, message",
    [
        ("/v1/models/other:predict", {"instances": ["a"]}, 404, "Servable not found"),
        ("/v1/models/tiny/versions/99:predict", {"instances": ["a"]}, 404, "version 99"),
        ("/v1/models/tiny/labels/stable:predict", {"instances": ["a"]}, 404, "label: 'stable'"),
        ("/v1/models/tiny:predict", {"instances": ["a"] * 65}, 400, "at most 64 a request"),
        (
            "/v1/models/tiny:predict",
            {"signature_name": "nope", "instances": ["a"]},
            400,
            "'nope' not found",
        ),
        ("/v1/models/tiny:predict", {"instances": [3]}, 400, "must hold strings"),
        ("/v1/models/other", None, 404, "Servable not found"),
        ("/v1/models/tiny/labels/canary", None, 404, "label"),
        ("/v2/anything", None, 404, "Malformed request: GET /v2/anything"),
    ],
)
def test_rest_refusals_carry_tf_servings_statuses(running, path, body, status, message):
    answer_status, answer = _rest(running, path, body)
    assert answer_status == status, answer
    assert message in answer.get("error", "")


def test_a_body_that_is_not_json_is_a_bad_request(running):
    request = urllib.request.Request(
        f"http://127.0.0.1:{running.rest.port}/v1/models/tiny:predict", data=b"\xff{"
    )
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=60)
    assert error.value.code == 400 and "not JSON" in json.loads(error.value.read())["error"]


def _request(texts):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(texts, dtype=tf.string))
    return request


def test_a_full_server_refuses_at_once_and_never_starts_an_expired_request(running):
    gate, counted = running.api.gate, running.counted
    release, entered, holder = _hold_slot(gate)  # the one request that may run
    queued_release, queued, queued_holder = None, None, None
    try:
        assert entered.wait(30)
        calls = counted.calls
        # Queued behind it until its deadline: answered DEADLINE_EXCEEDED, never searched.
        with pytest.raises(grpc.RpcError) as error:
            running.stub.Predict(_request(["A dog."]), timeout=0.5)
        assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        wait_for(lambda: gate.waiting == 0, timeout=30)
        queued_release, queued, queued_holder = _hold_slot(gate)  # the one queued place
        wait_for(lambda: gate.waiting == 1, timeout=30)
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as error:
            running.stub.Predict(_request(["A dog."]), timeout=30)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "limit of 1 running and 1 queued requests" in error.value.details()
        status, answer = _rest(running, "/v1/models/tiny:predict", {"instances": ["A dog."]})
        assert status == 429 and "retry later" in answer["error"]
        assert time.monotonic() - started < 10  # at once, not after the running request
    finally:
        release.set()
        if queued_release is not None:
            assert queued.wait(30)
            queued_release.set()
            queued_holder.join(30)
        holder.join(30)
    assert counted.calls == calls
    assert predict(running.stub, "tiny", ["Still there?"])["translation"].shape == (1,)


def test_a_cancelled_request_stops_at_the_next_part(running):
    counted = running.counted
    counted.hold, counted.calls = True, 0
    counted.started.clear()
    counted.release.clear()
    try:
        future = running.stub.Predict.future(_request(["A dog."] * 12), timeout=60)  # 3 parts
        assert counted.started.wait(30)
        future.cancel()
    finally:
        counted.release.set()
        counted.hold = False
    assert running.api.gate.wait_until_idle(30)
    assert counted.calls == 1  # the part running when the client left; no more


def _copy_version(exported, base_path, version):
    # As an exporter publishes: a whole directory renamed into place.
    staging = base_path / f".staging-{version}"
    shutil.copytree(exported / "1", staging)
    os.rename(staging, base_path / str(version))


@pytest.mark.slow  # two versions loaded, one with its warm-up compilations
def test_a_new_version_is_warmed_up_then_served_and_the_old_one_dropped(exported, tmp_path):
    base_path = tmp_path / "tiny"
    base_path.mkdir()
    _copy_version(exported, base_path, 1)
    first = ServableModel("tiny", str(base_path), warmup_threads=0)
    api = ModelApi(ServedVersions(first, str(base_path), None), RequestLimits(), RequestGate(2, 2))
    server = create_server(api, port=0, poll_seconds=0.1)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        status_stub = model_service_pb2_grpc.ModelServiceStub(channel)
        before = predict(stub, "tiny", SENTENCES)
        (base_path / "3").mkdir()  # a broken version: logged, skipped, 1 keeps serving
        (base_path / "3" / "saved_model.pb").write_bytes(b"not a SavedModel")
        deadline = time.monotonic() + 60
        while api.versions._failed_version != 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert api.versions.current is first
        shutil.rmtree(base_path / "3")
        _copy_version(exported, base_path, 4)
        while api.versions.current.version != 4:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert api.versions.current.warmup_seconds > 0  # warmed up before it served
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "tiny"
        (status,) = status_stub.GetModelStatus(request, timeout=30).model_version_status
        assert status.version == 4
        request = _request(SENTENCES)
        request.model_spec.version.value = 4
        response = stub.Predict(request, timeout=60)
        assert response.model_spec.version.value == 4
        np.testing.assert_array_equal(
            tf.make_ndarray(response.outputs["translation"]), before["translation"]
        )
        request.model_spec.version.value = 1
        with pytest.raises(grpc.RpcError) as error:
            stub.Predict(request, timeout=30)
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        channel.close()
        assert stop_server(server, grace=1)


def test_the_attention_signature_gives_every_blocks_map_averaging_to_the_searchs(servable):
    outputs = servable.signatures["translate_with_attention"](text=tf.constant(SENTENCES))
    blocks, attention = outputs["block_attention"].numpy(), outputs["attention"].numpy()
    assert blocks.shape[:1] + blocks.shape[2:] == attention.shape
    assert blocks.shape[1] == outputs["attention_blocks"].shape[1] >= 1
    # Teacher-forced on the translation, the blocks' mean is the search's own attention.
    np.testing.assert_allclose(blocks.mean(axis=1), attention, atol=1e-5)
