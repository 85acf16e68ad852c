"""The batch-inference drain: finish the request in flight within the budget, else hand it back."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from together_clusters.components.checkpoint import RequestDrain

from .conftest import Worker


class Queue:
    def __init__(self, items: list[str]) -> None:
        self.items = list(items)
        self.handed_back: list[str] = []

    def fetch(self) -> str | None:
        return self.items.pop(0) if self.items else None

    def hand_back(self, request: str) -> None:
        self.handed_back.append(request)


def test_the_request_in_flight_finishes_within_the_budget() -> None:
    drain: RequestDrain[str] = RequestDrain(budget_seconds=60)
    queue = Queue(["a", "b", "c"])
    done: list[str] = []

    def handle(request: str) -> None:
        if request == "b":
            drain.stop()  # SIGTERM arrives while "b" is in flight
            time.sleep(0.3)
        done.append(request)

    assert drain.run(queue.fetch, handle, queue.hand_back, poll_seconds=0.05) is True
    assert done == ["a", "b"]
    assert queue.handed_back == []
    assert queue.items == ["c"], "no new request is taken after SIGTERM"


class Cancelled(Exception):
    pass


def test_a_request_is_handed_back_only_once_its_thread_has_stopped() -> None:
    # Asked to stop half a second after SIGTERM; the rest of the budget bounds only a hang.
    drain: RequestDrain[str] = RequestDrain(budget_seconds=60, stop_seconds=59.5)
    queue = Queue(["slow", "next"])
    stopped: list[str] = []
    stopped_when_handed_back: list[list[str]] = []

    def handle(request: str, cancelled: threading.Event) -> None:
        drain.stop()
        cancelled.wait(30)
        time.sleep(0.05)  # cleaning up after the request to stop
        stopped.append(request)
        raise Cancelled(request)

    def hand_back(request: str) -> None:
        stopped_when_handed_back.append(list(stopped))
        queue.hand_back(request)

    assert drain.run(queue.fetch, handle, hand_back, poll_seconds=0.05) is False
    assert queue.handed_back == ["slow"]
    assert stopped_when_handed_back == [["slow"]], "handed back while its thread was still running"
    assert queue.items == ["next"]


def test_a_request_whose_thread_will_not_stop_is_neither_handed_back_nor_completed() -> None:
    drain: RequestDrain[str] = RequestDrain(budget_seconds=0.3, stop_seconds=0.2)
    queue = Queue(["stubborn"])
    completed: list[str] = []
    release = threading.Event()
    handlers: list[threading.Thread] = []

    def handle(request: str) -> str:
        handlers.append(threading.current_thread())
        drain.stop()
        release.wait(30)  # ignores any request to stop
        return f"answer to {request}"

    try:
        assert (
            drain.run(queue.fetch, handle, queue.hand_back, lambda r, _: completed.append(r), 0.05) is False
        )
    finally:
        release.set()
    handlers[0].join(30)  # the stubborn thread finishes now: its answer must go nowhere
    assert not handlers[0].is_alive()
    assert queue.handed_back == [] and completed == []


class RedeliveringQueue:
    """A queue with at-least-once delivery: what a dead consumer held unacknowledged comes back."""

    def __init__(self, count: int) -> None:
        self.ready = [f"r{i}" for i in range(count)]
        self.in_flight: set[str] = set()
        self.completed: list[str] = []

    def fetch(self) -> str | None:
        if not self.ready:
            return None
        request = self.ready.pop(0)
        self.in_flight.add(request)
        return request

    def hand_back(self, request: str) -> None:
        self.in_flight.remove(request)
        self.ready.insert(0, request)

    def complete(self, request: str, result: object) -> None:
        self.in_flight.remove(request)
        self.completed.append(request)

    def consumer_gone(self) -> None:
        self.ready[:0] = sorted(self.in_flight)
        self.in_flight.clear()


@pytest.mark.parametrize("cooperative", [True, False])
def test_across_a_preemption_no_request_is_served_twice_or_lost(cooperative: bool) -> None:
    queue = RedeliveringQueue(12)
    release = threading.Event()
    handlers: list[threading.Thread] = []
    # A cooperative handler is asked to stop half a second after SIGTERM and then may take a minute
    # (only a hang would); a stubborn one is given up on after the whole (short) budget.
    budget, stop = (60, 59.5) if cooperative else (0.3, 0.2)
    first: RequestDrain[str] = RequestDrain(budget_seconds=budget, stop_seconds=stop)

    def preempted_handler(request: str, cancelled: threading.Event) -> str:
        if request == "r5":
            handlers.append(threading.current_thread())
            first.stop()  # SIGTERM while r5 is in flight, and r5 outlasts the budget
            if cooperative:
                cancelled.wait(30)
                raise Cancelled(request)
            release.wait(30)
        return request.upper()

    try:
        assert first.run(queue.fetch, preempted_handler, queue.hand_back, queue.complete, 0.05) is False
        queue.consumer_gone()  # the pod is gone: the queue redelivers what it held
    finally:
        release.set()
    handlers[0].join(30)
    assert not handlers[0].is_alive()
    second: RequestDrain[str] = RequestDrain(budget_seconds=60)

    def handle(request: str) -> str:
        if not queue.ready:
            second.stop()
        return request.upper()

    assert second.run(queue.fetch, handle, queue.hand_back, queue.complete, 0.05) is True
    assert sorted(queue.completed) == sorted(f"r{i}" for i in range(12))
    assert len(queue.completed) == 12, "a request was served twice"


def test_a_failing_request_is_handed_back_and_the_error_raised() -> None:
    drain: RequestDrain[str] = RequestDrain(budget_seconds=60)
    queue = Queue(["bad"])

    def handle(request: str) -> None:
        raise RuntimeError("model crashed")

    with pytest.raises(RuntimeError, match="model crashed"):
        drain.run(queue.fetch, handle, queue.hand_back)
    assert queue.handed_back == ["bad"]


def test_budget_from_the_environment() -> None:
    assert RequestDrain.from_env({"DRAIN_BUDGET_SECONDS": "12"}).budget_seconds == 12.0
    assert RequestDrain.from_env({}).budget_seconds == 270.0


def test_sigterm_hands_back_the_request_in_flight_in_a_real_process(workers: list[Worker]) -> None:
    # Asked to stop half a second after SIGTERM; the rest of the budget bounds only a hang.
    worker = Worker(["drain"], {"DRAIN_BUDGET_SECONDS": "60", "DRAIN_STOP_SECONDS": "59.5"})
    workers.append(worker)
    worker.wait_for(lambda line: line == "HANDLING r0")
    worker.process.send_signal(signal.SIGTERM)
    assert worker.finish() == 143
    assert worker.seen[-2:] == ["STOPPED r0", "HANDED BACK r0"]
    assert "HANDLING r1" not in worker.seen
