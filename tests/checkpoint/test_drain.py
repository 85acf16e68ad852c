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


def test_a_request_still_running_when_the_budget_ends_is_handed_back() -> None:
    drain: RequestDrain[str] = RequestDrain(budget_seconds=0.2)
    queue = Queue(["slow", "next"])
    release = threading.Event()

    def handle(request: str) -> None:
        drain.stop()
        release.wait(30)

    try:
        assert drain.run(queue.fetch, handle, queue.hand_back, poll_seconds=0.05) is False
    finally:
        release.set()
    assert queue.handed_back == ["slow"]
    assert queue.items == ["next"]


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
    worker = Worker(["drain"], {"DRAIN_BUDGET_SECONDS": "1"})
    workers.append(worker)
    worker.wait_for(lambda line: line == "HANDLING r0")
    worker.process.send_signal(signal.SIGTERM)
    assert worker.finish() == 143
    assert worker.seen[-1] == "HANDED BACK r0"
    assert "HANDLING r1" not in worker.seen
