"""TF Serving's REST API (predict, model status, metadata) and the translation page, served
by Tornado on its own thread over the server's `ModelApi`.

Paths as TF Serving's: `POST /v1/models/NAME[/versions/N | /labels/L]:predict`,
`GET /v1/models/NAME[/versions/N]` (status), `GET /v1/models/NAME[/versions/N]/metadata`;
errors are `{"error": "..."}` with the HTTP status TF Serving gives the gRPC code. `GET /`
serves the page (`web/index.html`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import html
import importlib.resources
import json
import threading
import time
from typing import Any

import tornado.httpserver
import tornado.ioloop
import tornado.netutil
import tornado.web
from google.protobuf import json_format
from tensorflow_serving.apis import get_model_metadata_pb2, model_pb2

from convs2s_tf.serving.model_api import ModelApi
from convs2s_tf.serving.request_tensors import RequestError
from convs2s_tf.serving.rest_json import request_inputs, response_body

# TF Serving's HTTP status of each gRPC code (model_servers/http_server.cc).
HTTP_STATUS = {
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "RESOURCE_EXHAUSTED": 429,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
}
# The largest body a request may send: gRPC's default receive limit.
MAX_BODY_BYTES = 4 * 1024 * 1024
_MODEL_PATH = r"/v1/models/([^/:]+)(?:/versions/([0-9]+)|/labels/([^/:]+))?"


class _RequestContext:
    """A REST request as admission sees it: active until its connection closes, with the
    server's REST timeout as its deadline."""

    def __init__(self, timeout_seconds: float) -> None:
        self.deadline = time.monotonic() + timeout_seconds
        self.closed = False
        self.callbacks: list[Any] = []

    def is_active(self) -> bool:
        return not self.closed

    def time_remaining(self) -> float:
        return self.deadline - time.monotonic()

    def add_callback(self, callback: Any) -> bool:
        self.callbacks.append(callback)
        return True

    def end(self) -> None:
        self.closed = True
        for callback in self.callbacks:
            callback()


class _ApiHandler(tornado.web.RequestHandler):
    def initialize(self, server: RestServer) -> None:
        self.server = server
        self.context = _RequestContext(server.timeout_seconds)

    def on_connection_close(self) -> None:
        self.context.end()

    def on_finish(self) -> None:
        self.context.end()

    def write_error_json(self, error: RequestError) -> None:
        self.set_status(HTTP_STATUS.get(error.code, 500))
        self.finish({"error": str(error)})

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # Tornado's own refusals (a body over the limit, an unknown method) as JSON too.
        self.finish({"error": self._reason})

    def model_spec(self, name: str, version: str | None, label: str | None) -> Any:
        spec = model_pb2.ModelSpec(name=name)
        if version is not None:
            spec.version.value = int(version)
        if label is not None:
            spec.version_label = label
        return spec


class _PredictHandler(_ApiHandler):
    async def post(self, name: str, version: str | None, label: str | None) -> None:
        api = self.server.api
        try:
            try:
                body = json.loads(self.request.body)
            except ValueError as error:
                raise RequestError("INVALID_ARGUMENT", f"The body is not JSON: {error}.")
            if not isinstance(body, dict):
                raise RequestError("INVALID_ARGUMENT", "The body must be a JSON object.")
            spec = self.model_spec(name, version, label)
            spec.signature_name = str(body.get("signature_name", ""))
            signature = api.signature(spec)
            inputs, row_format = request_inputs(body, signature.inputs, api.limits)
            outputs = await asyncio.get_running_loop().run_in_executor(
                self.server.executor, api.predict, signature, inputs, self.context
            )
        except RequestError as error:
            if not self.context.closed:
                self.write_error_json(error)
            return
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(response_body(outputs, row_format)))


class _StatusHandler(_ApiHandler):
    def get(self, name: str, version: str | None, label: str | None) -> None:
        try:
            status = self.server.api.status(self.model_spec(name, version, label))
        except RequestError as error:
            return self.write_error_json(error)
        self.finish(_json_of(status))


class _MetadataHandler(_ApiHandler):
    def get(self, name: str, version: str | None, label: str | None) -> None:
        try:
            metadata = self.server.api.metadata(self.model_spec(name, version, label))
        except RequestError as error:
            return self.write_error_json(error)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        metadata.metadata["signature_def"].Unpack(signature_map)
        self.finish(
            {
                "model_spec": _json_of(metadata.model_spec),
                "metadata": {"signature_def": _json_of(signature_map)},
            }
        )


class _PageHandler(tornado.web.RequestHandler):
    def initialize(self, server: RestServer) -> None:
        self.server = server

    def get(self) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(self.server.page)


class _NotFoundHandler(tornado.web.RequestHandler):
    def prepare(self) -> None:
        self.set_status(404)
        self.finish({"error": f"Malformed request: {self.request.method} {self.request.path}"})


def _json_of(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


class RestServer:
    """TF Serving's REST API and the page on `host:port` (0: any free port), served on a
    thread of its own until `stop()`.

    Args:
        api: The `ModelApi` to serve.
        host: The address to bind.
        port: The port.
        timeout_seconds: A request's deadline (TF Serving's `--rest_api_timeout_in_ms`).

    Raises:
        OSError: The address is taken.
    """

    def __init__(self, api: ModelApi, host: str, port: int, timeout_seconds: float) -> None:
        self.api = api
        self.timeout_seconds = timeout_seconds
        # The page, read and named once rather than at every GET.
        page = importlib.resources.files("convs2s_tf.serving").joinpath("web/index.html")
        name = html.escape(api.name, quote=True)
        self.page = page.read_text(encoding="utf-8").replace("{{MODEL_NAME}}", name)
        # Each request waiting in the gate holds a thread; one more finds the gate full.
        self.executor = concurrent.futures.ThreadPoolExecutor(
            api.gate.capacity + 1, thread_name_prefix="rest"
        )
        sockets = tornado.netutil.bind_sockets(port, address=host, reuse_port=False)
        self.port = sockets[0].getsockname()[1]
        routes = [
            (_MODEL_PATH + ":predict", _PredictHandler, {"server": self}),
            (_MODEL_PATH + "/metadata", _MetadataHandler, {"server": self}),
            (_MODEL_PATH, _StatusHandler, {"server": self}),
            (r"/", _PageHandler, {"server": self}),
        ]
        application = tornado.web.Application(routes, default_handler_class=_NotFoundHandler)
        self._loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._http = tornado.httpserver.HTTPServer(application, max_body_size=MAX_BODY_BYTES)
            self._http.add_sockets(sockets)
            started.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="rest-api", daemon=True)
        self._thread.start()
        started.wait()

    def stop(self) -> None:
        """Stops listening and the thread; requests running in the executor end in the
        gate's own time."""

        def shutdown() -> None:
            self._http.stop()
            self._loop.stop()

        self._loop.call_soon_threadsafe(shutdown)
        self._thread.join(timeout=5)
        self.executor.shutdown(wait=False, cancel_futures=True)
