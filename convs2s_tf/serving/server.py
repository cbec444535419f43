"""The gRPC server: TF Serving's PredictionService and ModelService for one model, and the
standard gRPC health service, until a signal stops it."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Iterable
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from convs2s_tf.serving.model_service import ModelStatusServicer
from convs2s_tf.serving.prediction_service import PredictionServicer, ServableModel
from convs2s_tf.serving.request_tensors import RequestLimits


class PortInUseError(OSError):
    """The server's address is taken (by another server, perhaps this one started twice)."""


@dataclasses.dataclass
class RunningServer:
    """A started server.

    Attributes:
        grpc_server: The gRPC server.
        port: The port it is bound to.
        health: Its health service: SERVING for "" and the model's name until it stops.
    """

    grpc_server: grpc.Server
    port: int
    health: health.HealthServicer


def create_server(
    servable: ServableModel,
    host: str = "127.0.0.1",
    port: int = 8500,
    max_workers: int = 8,
    limits: RequestLimits | None = None,
) -> RunningServer:
    """A started gRPC server serving `servable` within `limits`, with ModelService and the
    gRPC health service beside PredictionService.

    Binds 127.0.0.1 unless told otherwise; port 0 picks a free port.

    Raises:
        PortInUseError: `host:port` is taken. gRPC's default SO_REUSEPORT would let a
            second server bind it beside the first and share its requests; it is off.
    """
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers)
    server = grpc.server(executor, options=[("grpc.so_reuseport", 0)])
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionServicer(servable, limits), server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelStatusServicer(servable), server)
    health_servicer = health.HealthServicer()
    for service in ("", servable.name):
        health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as error:  # gRPC's "Failed to bind to address"
        raise PortInUseError(f"Cannot serve on {host}:{port}: the address is in use.") from error
    server.start()
    return RunningServer(server, bound, health_servicer)


def serve_until_signal(running: RunningServer, signals: Iterable[int] | None = None) -> None:
    """Blocks until SIGTERM/SIGINT, then reports NOT_SERVING and stops the server
    gracefully."""
    import signal

    stopped = threading.Event()

    def handle(signum: int, frame: Any) -> None:
        del signum, frame
        stopped.set()

    for signum in signals or (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handle)
    stopped.wait()
    running.health.enter_graceful_shutdown()
    running.grpc_server.stop(grace=5).wait()
