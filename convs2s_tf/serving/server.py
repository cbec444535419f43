"""The model server: TF Serving's gRPC services (PredictionService, ModelService) and the
standard gRPC health service, TF Serving's REST API and a page for people, all over one
`ModelApi`, until a signal stops it."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Iterable
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from convs2s_tf.serving.model_api import ModelApi
from convs2s_tf.serving.model_service import ModelStatusServicer
from convs2s_tf.serving.prediction_service import PredictionServicer
from convs2s_tf.serving.rest_api import RestServer

# Threads beyond the requests the gate admits, for metadata, status and health checks,
# so that those answer while every Predict slot is taken.
_SPARE_THREADS = 4


class PortInUseError(OSError):
    """The server's address is taken (by another server, perhaps this one started twice)."""


@dataclasses.dataclass
class RunningServer:
    """A started server.

    Attributes:
        api: The `ModelApi` every transport serves.
        grpc_server: The gRPC server.
        port: The gRPC port.
        health: The health service: SERVING for "" and the model's name until it stops.
        rest: The REST server (None without a REST port).
        stop_polling: Set to stop polling the base path for new versions.
    """

    api: ModelApi
    grpc_server: grpc.Server
    port: int
    health: health.HealthServicer
    rest: RestServer | None = None
    stop_polling: threading.Event = dataclasses.field(default_factory=threading.Event)


def create_server(
    api: ModelApi,
    host: str = "127.0.0.1",
    port: int = 8500,
    rest_api_port: int | None = None,
    rest_api_timeout_seconds: float = 30.0,
    poll_seconds: float = 0.0,
) -> RunningServer:
    """A started server of `api`: gRPC on `host:port`, REST on `host:rest_api_port`.

    Binds 127.0.0.1 unless told otherwise; port 0 picks a free port.

    Args:
        api: The `ModelApi` to serve.
        host: The address both transports bind.
        port: The gRPC port.
        rest_api_port: The REST port (None: no REST; 0: any free port).
        rest_api_timeout_seconds: A REST request's deadline (TF Serving's
            `--rest_api_timeout_in_ms`).
        poll_seconds: Seconds between polls of the base path for a new version (0: none).

    Raises:
        PortInUseError: A port is taken. gRPC's default SO_REUSEPORT would let a second
            server bind it beside the first and share its requests; it is off.
    """
    threads = api.gate.capacity + _SPARE_THREADS
    executor = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="grpc")
    # gRPC refuses (RESOURCE_EXHAUSTED) what no thread can take rather than queueing it.
    server = grpc.server(
        executor, options=[("grpc.so_reuseport", 0)], maximum_concurrent_rpcs=threads
    )
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionServicer(api), server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelStatusServicer(api), server)
    health_servicer = health.HealthServicer()
    for service in ("", api.name):
        health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as error:  # gRPC's "Failed to bind to address"
        raise PortInUseError(f"Cannot serve on {host}:{port}: the address is in use.") from error
    rest = None
    if rest_api_port is not None:
        try:
            rest = RestServer(api, host, rest_api_port, rest_api_timeout_seconds)
        except OSError as error:
            raise PortInUseError(
                f"Cannot serve REST on {host}:{rest_api_port}: the address is in use."
            ) from error
    server.start()
    running = RunningServer(api, server, bound, health_servicer, rest)
    if poll_seconds > 0:
        api.versions.poll_every(poll_seconds, running.stop_polling)
    return running


def stop_server(running: RunningServer, grace: float = 5.0) -> bool:
    """Stops `running` as TF Serving does: health NOT_SERVING, no new requests, those in
    flight given `grace` seconds to finish, then cancelled (a search in parts stops at its
    next part).

    Returns:
        Whether every request had ended within `grace` + 4 seconds; TensorFlow cannot
        interrupt a running part, so a caller that must exit then exits without waiting
        for it.
    """
    running.stop_polling.set()
    running.health.enter_graceful_shutdown()
    if running.rest is not None:
        running.rest.stop()
    running.grpc_server.stop(grace=grace).wait(grace + 1)
    return running.api.gate.wait_until_idle(timeout=3.0)


def serve_until_signal(
    running: RunningServer, grace: float = 5.0, signals: Iterable[int] | None = None
) -> bool:
    """Blocks until SIGTERM/SIGINT, then `stop_server(running, grace)`; returns its answer."""
    import signal

    stopped = threading.Event()

    def handle(signum: int, frame: Any) -> None:
        del signum, frame
        stopped.set()

    for signum in signals or (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handle)
    stopped.wait()
    return stop_server(running, grace)
