"""RequestGate: a bounded number of requests run, a bounded queue waits, the rest are
refused at once; waiting requests leave when their client goes or their deadline passes."""

import threading
import time

import pytest
from helpers.waiting import wait_for

from convs2s_tf.serving.admission import RequestGate, check_wanted
from convs2s_tf.serving.request_tensors import RequestError


class Context:
    """A request's transport as the gate sees it: cancellable, with an optional deadline."""

    def __init__(self, timeout=None):
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.active = True
        self.callbacks = []

    def is_active(self):
        return self.active

    def time_remaining(self):
        return None if self.deadline is None else self.deadline - time.monotonic()

    def add_callback(self, callback):
        self.callbacks.append(callback)
        return True

    def cancel(self):
        self.active = False
        for callback in self.callbacks:
            callback()


def _hold(gate, context, entered, release, outcome):
    try:
        with gate.admitted(context):
            entered.set()
            release.wait(30)
        outcome.append("ran")
    except RequestError as error:
        outcome.append(error.code)


def _start(gate, context, release):
    entered, outcome = threading.Event(), []
    thread = threading.Thread(target=_hold, args=(gate, context, entered, release, outcome))
    thread.start()
    return thread, entered, outcome


def test_beyond_running_and_queued_requests_are_refused_at_once():
    gate, release = RequestGate(max_in_flight=1, max_queued=1), threading.Event()
    first, first_entered, first_outcome = _start(gate, Context(), release)
    assert first_entered.wait(30) and gate.running == 1
    second, second_entered, second_outcome = _start(gate, Context(), release)
    wait_for(lambda: gate.waiting == 1, timeout=30)
    assert not second_entered.is_set()
    started = time.monotonic()
    with pytest.raises(RequestError) as refused:
        with gate.admitted(Context()):
            pass
    assert refused.value.code == "RESOURCE_EXHAUSTED" and time.monotonic() - started < 1
    assert "limit of 1 running and 1 queued requests" in str(refused.value)
    release.set()
    for thread in (first, second):
        thread.join(30)
    assert first_outcome == second_outcome == ["ran"]
    assert gate.running == 0 and gate.wait_until_idle(0)


@pytest.mark.parametrize("how, code", [("deadline", "DEADLINE_EXCEEDED"), ("cancel", "CANCELLED")])
def test_a_waiting_request_whose_client_is_gone_never_runs(how, code):
    gate, release = RequestGate(max_in_flight=1, max_queued=2), threading.Event()
    holder, entered, _ = _start(gate, Context(), release)
    assert entered.wait(30)
    context = Context(timeout=0.2 if how == "deadline" else None)
    waiter, waiter_entered, outcome = _start(gate, context, release)
    if how == "cancel":
        wait_for(lambda: gate.waiting == 1, timeout=30)
        context.cancel()
    waiter.join(30)
    assert outcome == [code] and not waiter_entered.is_set()
    assert gate.waiting == 0 and gate.running == 1  # its place in the queue is free again
    release.set()
    holder.join(30)


def test_a_request_already_given_up_is_not_started():
    gone = Context()
    gone.cancel()
    with pytest.raises(RequestError, match="cancelled") as error:
        check_wanted(gone)
    assert error.value.code == "CANCELLED"
    with pytest.raises(RequestError) as error:
        with RequestGate(1, 0).admitted(Context(timeout=-1)):
            pass
    assert error.value.code == "DEADLINE_EXCEEDED"


def test_idle_is_reported_within_the_timeout():
    gate, release = RequestGate(1, 0), threading.Event()
    holder, entered, _ = _start(gate, Context(), release)
    assert entered.wait(30)
    assert not gate.wait_until_idle(0.05)
    release.set()
    assert gate.wait_until_idle(30)
    holder.join(30)


def test_sizes_are_checked():
    with pytest.raises(ValueError, match="max_in_flight must be >= 1"):
        RequestGate(0, 1)
    with pytest.raises(ValueError, match="max_queued >= 0"):
        RequestGate(1, -1)
