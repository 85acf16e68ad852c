"""The oracle of the BatchInference drills and the worker they run, checked without the twin.

The counting queue must see what a real queue would (a lease held until completed, handed back or expired)
and must catch a request served twice or never; the worker program, run as a real process and sent a real
SIGTERM, must finish the request in flight within its drain budget or hand it back, never both.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from together_clusters.components.checkpoint.contract import ENV_DRAIN_BUDGET, PREEMPTED_EXIT_CODE

from . import inference_worker
from ._twin import wait_for
from .counting_queue import CountingQueue, expected_result, serve

WORKER = Path(inference_worker.__file__)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def take(http: httpx.Client, worker: str) -> dict | None:
    reply = http.post("/take", json={"worker": worker})
    assert reply.status_code in (200, 204), reply.text
    return reply.json() if reply.status_code == 200 else None


def complete(http: httpx.Client, taken: dict, worker: str, result: str | None = None) -> int:
    body = {"id": taken["id"], "lease": taken["lease"], "worker": worker, "draining": False}
    body["result"] = expected_result(taken["id"]) if result is None else result
    return http.post("/complete", json=body).status_code


def hand_back(http: httpx.Client, taken: dict, worker: str) -> int:
    body = {"id": taken["id"], "lease": taken["lease"], "worker": worker, "draining": True}
    return http.post("/hand-back", json=body).status_code


def test_the_oracle_catches_a_request_served_twice_and_one_never_served() -> None:
    clock = Clock()
    queue = CountingQueue(lease_seconds=30, clock=clock)
    for request_id in ("r1", "r2", "r3"):
        queue.put(request_id, {"seconds": 1})
    with serve(queue) as url, httpx.Client(base_url=url) as http:
        slow = take(http, "a")
        assert slow is not None and slow["id"] == "r1"
        clock.now = 31  # a's lease runs out while a still works on r1: the queue redelivers it
        again = take(http, "b")
        assert again is not None and again["id"] == "r1"
        assert complete(http, again, "b") == 200
        assert complete(http, slow, "a") == 409  # stale, but a served it all the same
        r2 = take(http, "b")
        assert r2 is not None and complete(http, r2, "b", result="someone else's answer") == 200

    problems = queue.problems()
    assert [p.split(":")[0] for p in problems] == ["r1", "r2", "r3"]
    assert "completed 2 times" in problems[0] and "complete by a (stale)" in problems[0]
    assert "is not r2's" in problems[1]
    assert "never completed" in problems[2]
    assert not queue.drained()


def test_a_lease_holds_until_handed_back_or_expired_and_a_stale_hand_back_is_ignored() -> None:
    clock = Clock()
    queue = CountingQueue(lease_seconds=30, clock=clock)
    queue.put("r1", {"seconds": 1})
    with serve(queue) as url, httpx.Client(base_url=url) as http:
        first = take(http, "a")
        assert first is not None
        assert take(http, "b") is None  # leased to a
        clock.now = 10
        assert [(w, h.request_id, h.held_seconds) for w, h in queue.holding().items()] == [("a", "r1", 10)]
        assert hand_back(http, first, "a") == 200
        second = take(http, "b")  # visible again at once, no lease to wait out
        assert second is not None and second["id"] == "r1"
        clock.now = 40
        third = take(http, "c")
        assert third is not None and third["id"] == "r1"
        assert hand_back(http, second, "b") == 409  # b's lease expired: c holds r1 now
        assert take(http, "d") is None
        assert complete(http, third, "c") == 200

    assert queue.problems() == [] and queue.drained()
    (record,) = queue.records().values()
    assert [w for w, _ in record.deliveries] == ["a", "b", "c"]
    assert [(o.kind, o.worker, o.accepted) for o in record.outcomes] == [
        ("hand-back", "a", True),
        ("expired", "b", True),
        ("hand-back", "b", False),
        ("complete", "c", True),
    ]


@contextmanager
def worker_process(url: str, name: str, budget_seconds: float) -> Iterator[subprocess.Popen[str]]:
    env = {
        **os.environ,
        inference_worker.ENV_QUEUE_URL: url,
        inference_worker.ENV_WORKER_NAME: name,
        ENV_DRAIN_BUDGET: str(budget_seconds),
    }
    proc = subprocess.Popen([sys.executable, str(WORKER)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def sigterm_while_holding(queue: CountingQueue, proc: subprocess.Popen[str], worker: str) -> str:
    held = wait_for(lambda: queue.holding().get(worker), f"{worker} to take a request", timeout=30)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == PREEMPTED_EXIT_CODE
    return held.request_id


def test_a_worker_finishes_the_request_in_flight_within_its_budget_and_takes_no_other() -> None:
    queue = CountingQueue(lease_seconds=600)
    queue.put("r1", {"seconds": 3})
    queue.put("r2", {"seconds": 0})
    with serve(queue) as url, worker_process(url, "w1", budget_seconds=120) as proc:
        assert sigterm_while_holding(queue, proc, "w1") == "r1"

    records = queue.records()
    assert [(o.kind, o.draining) for o in records["r1"].outcomes] == [("complete", True)]
    assert records["r1"].results == [expected_result("r1")]
    assert records["r2"].deliveries == [], "a request was taken after SIGTERM"


def test_a_worker_hands_back_what_it_cannot_finish_and_another_serves_it_exactly_once() -> None:
    queue = CountingQueue(lease_seconds=600)  # a lease that never expires here: only the hand-back helps
    queue.put("long", {"seconds": 4})  # w1's budget is 1 s: it must hand this back
    for i in range(5):
        queue.put(f"r{i}", {"seconds": 0.05})
    with serve(queue) as url:
        with worker_process(url, "w1", budget_seconds=1) as proc:
            assert sigterm_while_holding(queue, proc, "w1") == "long"
        assert [(o.kind, o.draining) for o in queue.records()["long"].outcomes] == [("hand-back", True)]
        with worker_process(url, "w2", budget_seconds=120) as proc:
            wait_for(queue.drained, "the queue to drain", timeout=60)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == PREEMPTED_EXIT_CODE

    assert queue.problems() == []
    long = queue.records()["long"]
    assert [w for w, _ in long.deliveries] == ["w1", "w2"]
    assert [(o.kind, o.worker) for o in long.outcomes] == [("hand-back", "w1"), ("complete", "w2")]
