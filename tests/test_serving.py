"""The gRPC path on loopback: pipelines.serve and pipelines.client with TF Serving's
real protocol (`tensorflow_serving.apis`)."""

import concurrent.futures
import signal
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers.subprocesses import (
    run_python,
    start_server,
    start_server_with_banner,
    stop_server,
)
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from convs2s_tf.serving.client import predict

SENTENCES = [f"A man number {i} is riding a bicycle." for i in range(5)] + [""]


@pytest.fixture(scope="module")
def server(exported, fork_server):
    # Room for test_concurrent_clients' 16 clients at once (4 searches, 12 queued).
    process, address = start_server(
        exported, "tiny", "--max_queued_requests=12", fork_server=fork_server
    )
    yield process, address
    stop_server(process)


@pytest.fixture(scope="module")
def stub(server):
    channel = grpc.insecure_channel(server[1])
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()


def test_client_round_trip(server, stub, fork_server):
    # The newest version is served (the export test may have written version 2).
    outputs = predict(stub, "tiny", SENTENCES)
    assert outputs["translation"].shape == (len(SENTENCES),)
    assert np.all(np.isfinite(outputs["score"]))
    result = run_python(
        [
            "-m",
            "pipelines.client",
            f"--server={server[1]}",
            "--model_name=tiny",
            SENTENCES[0],
            SENTENCES[1],
        ],
        timeout=120,
        fork_server=fork_server,
    )
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].split("\t")[0] == outputs["translation"][0].decode("utf-8")


def test_concurrent_clients(stub):
    expected = {
        text: translation
        for text, translation in zip(SENTENCES, predict(stub, "tiny", SENTENCES)["translation"])
    }

    def client(index):
        answers = []
        for request in range(25):
            text = SENTENCES[(index + request) % len(SENTENCES)]
            outputs = predict(stub, "tiny", [text], timeout=60)
            answers.append(outputs["translation"][0] == expected[text])
        return answers

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(client, range(16)))
    assert sum(len(r) for r in results) == 400
    assert all(all(r) for r in results)


def _declaring_strings(count, values):
    proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=values)
    proto.tensor_shape.dim.add(size=count)
    return proto


def _request(name="tiny", signature="serving_default", value=None):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    request.inputs["text"].CopyFrom(
        value if value is not None else tf.make_tensor_proto(["A dog."], dtype=tf.string)
    )
    return request


@pytest.mark.parametrize(
    "request_kwargs, code, message",
    [
        ({"name": "other"}, grpc.StatusCode.NOT_FOUND, "Servable not found"),
        ({"signature": "nope"}, grpc.StatusCode.FAILED_PRECONDITION, "'nope' not found"),
        (
            {"value": tf.make_tensor_proto([1, 2], dtype=tf.int32)},
            grpc.StatusCode.INVALID_ARGUMENT,
            "must be string, got int32",
        ),
        (
            {"value": tf.make_tensor_proto(np.array([], dtype=object), dtype=tf.string)},
            grpc.StatusCode.INVALID_ARGUMENT,
            "empty batch",
        ),
        ({"value": tensor_pb2.TensorProto()}, grpc.StatusCode.INVALID_ARGUMENT, "has no dtype"),
        (
            # About 30 bytes declaring a billion strings: refused before anything is built.
            {"value": _declaring_strings(10**9, [b"x"])},
            grpc.StatusCode.INVALID_ARGUMENT,
            "holds 1000000000 sentences; this server takes at most 1024 a request",
        ),
        (
            {"value": _declaring_strings(3, [b"x"])},
            grpc.StatusCode.INVALID_ARGUMENT,
            "declares shape [3] (3 values) but carries 1",
        ),
    ],
)
def test_bad_requests_get_clear_errors_and_server_keeps_serving(
    stub, request_kwargs, code, message
):
    with pytest.raises(grpc.RpcError) as error:
        stub.Predict(_request(**request_kwargs), timeout=30)
    assert error.value.code() == code
    assert message in error.value.details()
    assert predict(stub, "tiny", ["Still there?"])["translation"].shape == (1,)


def test_thread_flags_size_the_pools_and_serve_the_same_translations(exported, stub, fork_server):
    # TF Serving's own flags: one thread per operation and one operation at a time.
    process, address, banner = start_server_with_banner(
        exported,
        "tiny",
        "--tensorflow_intra_op_parallelism=1",
        "--tensorflow_inter_op_parallelism=1",
        "--warmup_threads=0",
        fork_server=fork_server,
    )
    try:
        assert "(intra-op threads: 1, inter-op threads: 1)" in banner, banner
        with grpc.insecure_channel(address) as channel:
            one_thread = predict(
                prediction_service_pb2_grpc.PredictionServiceStub(channel), "tiny", SENTENCES
            )
    finally:
        stop_server(process)
    default = predict(stub, "tiny", SENTENCES)
    np.testing.assert_array_equal(one_thread["translation"], default["translation"])


def test_op_parallelism_is_set_before_tensorflow_runs_and_refused_after():
    script = (
        "import tensorflow as tf\n"
        "from convs2s_tf.serving import set_op_parallelism\n"
        "print(set_op_parallelism(0, 0), set_op_parallelism(1, 2))\n"
        "tf.constant(1.0) + 1.0\n"
        "print(set_op_parallelism(1, 2))\n"
        "try:\n"
        "    set_op_parallelism(2, 2)\n"
        "except RuntimeError:\n"
        "    print('refused')\n"
        "try:\n"
        "    set_op_parallelism(-1, 0)\n"
        "except ValueError as error:\n"
        "    print(error)\n"
    )
    result = run_python(["-c", script], timeout=120)
    assert result.stdout.splitlines() == [
        "(0, 0) (1, 2)",
        "(1, 2)",
        "refused",
        "intra_op must be >= 0, got -1.",
    ]


def test_model_metadata(stub):
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = "tiny"
    request.metadata_field.append("signature_def")
    response = stub.GetModelMetadata(request, timeout=30)
    signatures = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signatures)
    assert {"serving_default", "translate_nbest", "translate_ids"} <= set(signatures.signature_def)
    assert "text" in signatures.signature_def["serving_default"].inputs


def test_a_second_server_on_the_same_port_stops_with_one_line(exported, server, fork_server):
    # gRPC's default SO_REUSEPORT would have let it bind beside the first and serve.
    port = server[1].rsplit(":", 1)[1]
    arguments = [f"--model_base_path={exported}", "--model_name=tiny", f"--port={port}"]
    second = run_python(
        ["-m", "pipelines.serve", *arguments, "--warmup_threads=0"],
        check=False,
        fork_server=fork_server,
    )
    assert second.returncode == 2, second.stderr[-3000:]
    assert second.stderr.strip().splitlines()[-1] == (
        f"serve: error: Cannot serve on 127.0.0.1:{port}: the address is in use."
    )


def test_model_status_and_health_are_tf_servings(server):
    channel = grpc.insecure_channel(server[1])
    models = model_service_pb2_grpc.ModelServiceStub(channel)
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "tiny"
    (status,) = models.GetModelStatus(request, timeout=30).model_version_status
    assert status.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    assert status.version >= 1 and status.status.error_code == 0
    for name, version in (("other", None), ("tiny", status.version + 1)):
        request.model_spec.name = name
        if version:
            request.model_spec.version.value = version
        with pytest.raises(grpc.RpcError) as error:
            models.GetModelStatus(request, timeout=30)
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
    checks = health_pb2_grpc.HealthStub(channel)
    for service in ("", "tiny"):
        answer = checks.Check(health_pb2.HealthCheckRequest(service=service), timeout=30)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    channel.close()


def test_sigterm_stops_cleanly(server, stub):
    process, _ = server
    process.send_signal(signal.SIGTERM)
    stdout, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "Server stopped." in stdout


@pytest.mark.slow  # a server of its own and a long request
def test_sigterm_during_a_long_request_exits_within_the_grace_and_five_seconds(
    exported, fork_server
):
    process, address = start_server(
        exported,
        "tiny",
        "--shutdown_grace_seconds=0",
        "--search_part_size=16",
        "--warmup_threads=0",
        fork_server=fork_server,
    )
    try:
        with grpc.insecure_channel(address) as channel:
            long_request = _request(value=tf.make_tensor_proto([SENTENCES[1]] * 1024))
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            future = stub.Predict.future(long_request, timeout=120)
            time.sleep(2)  # searching its first parts
            assert not future.done()
            process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            process.wait(timeout=60)
            assert time.monotonic() - signalled < 5
            assert process.returncode == 0
            with pytest.raises(grpc.RpcError):
                future.result(timeout=30)  # cancelled, not answered
    finally:
        stop_server(process)


@pytest.mark.slow  # over ten seconds on 2 cores
def test_servable_replays_the_warmup_requests_before_serving(exported, monkeypatch):
    from convs2s_tf.serving import servable as servable_module

    calls = []

    def replay(loaded, path, threads):
        calls.append((path, threads))
        return 1.5

    monkeypatch.setattr(servable_module, "replay_warmup_requests", replay)
    servable = servable_module.ServableModel("m", str(exported), warmup_threads=2)
    assert calls == [(servable.path, 2)] and servable.warmup_seconds == 1.5
    # By default too (None: one thread per core, as replay_warmup_requests counts them).
    servable_module.ServableModel("m", str(exported))
    assert calls[1:] == [(servable.path, None)]
    # 0: none, as TF Serving with --enable_model_warmup=false.
    assert servable_module.ServableModel("m", str(exported), 0).warmup_seconds == 0.0
    assert len(calls) == 2
    with pytest.raises(ValueError, match="warmup_threads must be >= 0, got -1"):
        servable_module.ServableModel("m", str(exported), -1)
