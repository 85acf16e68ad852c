"""A BatchInference worker as a pod runs it: the test fixture the drills preempt.

    python inference_worker.py    (env: QUEUE_URL, DRAIN_BUDGET_SECONDS; WORKER_NAME, else <HOSTNAME>:<pid>)

It follows the worker contract through ``RequestDrain.from_env()``: takes requests from the counting queue
at QUEUE_URL, "serves" each for its payload's ``seconds`` (a cooperative handler: it stops soon after it is
asked to), delivers the result through the one ``complete`` path and hands a stopped request back. On
SIGTERM it takes no new request and finishes the one in flight within the drain budget, or hands it back.
It exits 143 (terminated) once stopped, as a container ending on SIGTERM does.

Only the standard library and ``together_clusters`` are imported: the twin's runtime runs this file as the
pod's main container.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from together_clusters.components.checkpoint import RequestDrain
from together_clusters.components.checkpoint.contract import PREEMPTED_EXIT_CODE

ENV_QUEUE_URL = "QUEUE_URL"
ENV_WORKER_NAME = "WORKER_NAME"
IDLE_POLL_SECONDS = 0.1
HTTP_TIMEOUT_SECONDS = 10

Request = dict[str, Any]


class Stopped(Exception):
    """The request was asked to stop before it finished."""


class QueueClient:
    def __init__(self, base_url: str, worker: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.worker = worker

    def _post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps({"worker": self.worker, **body}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def take(self) -> Request | None:
        status, body = self._post("/take", {})
        if status == 204:
            time.sleep(IDLE_POLL_SECONDS)
            return None
        if status != 200:
            raise RuntimeError(f"take: HTTP {status}: {body!r}")
        taken: Request = json.loads(body)
        return taken

    def complete(self, request: Request, result: Any, draining: bool) -> None:
        status, body = self._post(
            "/complete",
            {"id": request["id"], "lease": request["lease"], "result": result, "draining": draining},
        )
        if status not in (200, 409):  # 409: the lease had expired and the request went to another worker
            raise RuntimeError(f"complete {request['id']}: HTTP {status}: {body!r}")

    def hand_back(self, request: Request, draining: bool) -> None:
        status, body = self._post(
            "/hand-back", {"id": request["id"], "lease": request["lease"], "draining": draining}
        )
        if status not in (200, 409):
            raise RuntimeError(f"hand back {request['id']}: HTTP {status}: {body!r}")


def serve(request: Request, cancelled: threading.Event) -> str:
    """The request's work: its payload's ``seconds``, cut short (Stopped) when asked to stop."""
    if cancelled.wait(float(request["payload"]["seconds"])):
        raise Stopped(request["id"])
    return f"served {request['id']}"


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    # A pod's HOSTNAME is its name: the test maps workers to pods, and so to the nodes it preempts.
    host = os.environ.get("HOSTNAME") or socket.gethostname()
    worker = os.environ.get(ENV_WORKER_NAME) or f"{host}:{os.getpid()}"
    queue = QueueClient(os.environ[ENV_QUEUE_URL], worker)
    drain: RequestDrain[Request] = RequestDrain.from_env().install()
    logging.info("worker %s: drain budget %.1fs", worker, drain.budget_seconds)

    def complete(request: Request, result: Any) -> None:
        queue.complete(request, result, drain.stopping.is_set())

    def hand_back(request: Request) -> None:
        queue.hand_back(request, drain.stopping.is_set())

    finished = drain.run(queue.take, serve, hand_back, complete, poll_seconds=0.05)
    logging.info(
        "worker %s: stopped (%s)", worker, "drained" if finished else "in-flight request not finished"
    )
    return PREEMPTED_EXIT_CODE


if __name__ == "__main__":
    sys.exit(main())
