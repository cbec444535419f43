"""Admission of requests: a bounded number run at once, a bounded queue waits, the rest
are refused at once; a request whose client has gone or whose deadline has passed is
never started.

Without it a server under overload queues without bound (every queued request holds
its input and, once started, its search's memory) and computes abandoned requests to
the end, so that every later request waits for work nobody will read.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from convs2s_tf.serving.request_tensors import RequestError


class RequestContext(Protocol):
    """What admission needs of a request's transport (a `grpc.ServicerContext` is one)."""

    def is_active(self) -> bool:
        """Whether the client still waits for the answer."""

    def time_remaining(self) -> float | None:
        """Seconds until the request's deadline (None: no deadline)."""

    def add_callback(self, callback: Callable[[], None]) -> bool:
        """Calls `callback()` when the request ends (answered, cancelled or timed out)."""


def check_wanted(context: RequestContext) -> None:
    """Raises `RequestError` if nobody waits for this request any more: CANCELLED if its
    client has gone, DEADLINE_EXCEEDED if its deadline has passed."""
    remaining = context.time_remaining()
    if remaining is not None and remaining <= 0:
        raise RequestError("DEADLINE_EXCEEDED", "The request's deadline passed before it ran.")
    if not context.is_active():
        raise RequestError("CANCELLED", "The client cancelled the request.")


class RequestGate:
    """At most `max_in_flight` requests run at once and at most `max_queued` wait for a
    turn; a request beyond both is refused at once with RESOURCE_EXHAUSTED.

    A waiting request leaves the queue when its client goes or its deadline passes
    (CANCELLED or DEADLINE_EXCEEDED, not started).

    Args:
        max_in_flight: Requests that run at once (>= 1).
        max_queued: Requests that may wait for a turn (>= 0).

    Example:

    >>> gate = RequestGate(max_in_flight=2, max_queued=4)
    >>> gate.capacity
    6
    """

    def __init__(self, max_in_flight: int, max_queued: int) -> None:
        if max_in_flight < 1 or max_queued < 0:
            raise ValueError(
                f"max_in_flight must be >= 1 and max_queued >= 0, got {max_in_flight} and "
                f"{max_queued}."
            )
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self._condition = threading.Condition()
        self._running = 0
        self._waiting = 0

    @property
    def capacity(self) -> int:
        """Requests the gate holds at most: running and waiting."""
        return self.max_in_flight + self.max_queued

    @property
    def running(self) -> int:
        """Requests running now."""
        with self._condition:
            return self._running

    @property
    def waiting(self) -> int:
        """Requests waiting for a turn now."""
        with self._condition:
            return self._waiting

    @contextlib.contextmanager
    def admitted(self, context: RequestContext) -> Iterator[None]:
        """Runs the block once the request has its turn.

        Raises:
            RequestError: RESOURCE_EXHAUSTED at once when the gate is full; CANCELLED or
                DEADLINE_EXCEEDED when the client goes or the deadline passes while the
                request waits (or before).
        """
        with self._condition:
            if self._running + self._waiting >= self.capacity:
                raise RequestError(
                    "RESOURCE_EXHAUSTED",
                    f"The server is at its limit of {self.max_in_flight} running and "
                    f"{self.max_queued} queued requests; retry later.",
                )
            self._waiting += 1
        try:
            self._await_turn(context)
        finally:
            with self._condition:
                self._waiting -= 1
        try:
            yield
        finally:
            with self._condition:
                self._running -= 1
                self._condition.notify_all()

    def _await_turn(self, context: RequestContext) -> None:
        # The request's end wakes its waiter at once, whatever else the queue does.
        def wake() -> None:
            with self._condition:
                self._condition.notify_all()

        context.add_callback(wake)
        with self._condition:
            while True:
                check_wanted(context)
                if self._running < self.max_in_flight:
                    self._running += 1
                    return
                remaining = context.time_remaining()
                self._condition.wait(None if remaining is None else max(remaining, 0.0))

    def wait_until_idle(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds for no request to run; whether none runs."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._condition.wait(left)
            return True
