"""A request queue that counts: the oracle of the BatchInference drills, run by the test, outside the code
under test.

It has the lease semantics of a real work queue (SQS's visibility timeout, a broker's unacked message): a
worker takes a request with a lease; ``complete`` delivers the result and ends it; ``hand-back`` makes it
visible again at once; a lease that expires (its worker died or hung) redelivers the request. Every
delivery, completion, hand-back and expiry is recorded per request id, so :meth:`CountingQueue.problems`
finds a request completed twice (served twice) and one never completed (lost).

HTTP, JSON bodies (what the worker program speaks):

- ``POST /take {"worker"}`` -> 200 ``{"id", "lease", "payload"}``, or 204 when nothing is ready;
- ``POST /complete {"id", "lease", "worker", "result", "draining"}`` -> 200, or 409 when the lease is no
  longer that request's current one (the completion is recorded all the same: the result was served);
- ``POST /hand-back {"id", "lease", "worker", "draining"}`` -> 200, or 409 for a stale lease (ignored).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """What became of one delivery: ``complete``, ``hand-back`` or ``expired``."""

    kind: str
    worker: str
    lease: str
    draining: bool = False
    """The worker had been told to stop (SIGTERM) when it completed or handed back."""
    accepted: bool = True
    """The lease was the request's current one (a stale completion is recorded, not accepted)."""


@dataclass
class Record:
    """One request's history."""

    payload: dict[str, Any]
    deliveries: list[tuple[str, str]] = field(default_factory=list)
    """(worker, lease) of every time the request was taken."""
    outcomes: list[Outcome] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(o.kind == kind for o in self.outcomes)


@dataclass(frozen=True)
class Held:
    """A request a worker holds a live lease on, for ``held_seconds`` so far."""

    request_id: str
    payload: dict[str, Any]
    held_seconds: float


class CountingQueue:
    """The queue's state; thread-safe, so the HTTP handlers and the test share it."""

    def __init__(self, lease_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.lease_seconds = lease_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, Record] = {}
        self._ready: list[str] = []
        # request id -> (lease, worker, expires at) while it is taken and not yet completed or handed back
        self._leased: dict[str, tuple[str, str, float]] = {}
        self._done: set[str] = set()

    def put(self, request_id: str, payload: Mapping[str, Any]) -> None:
        with self._lock:
            if request_id in self._records:
                raise ValueError(f"request id {request_id!r} was already put")
            self._records[request_id] = Record(dict(payload))
            self._ready.append(request_id)

    def take(self, worker: str) -> tuple[str, str, dict[str, Any]] | None:
        """The next ready request with a new lease, or None; expired leases are redelivered first."""
        with self._lock:
            self._expire()
            if not self._ready:
                return None
            request_id = self._ready.pop(0)
            lease = secrets.token_hex(8)
            self._leased[request_id] = (lease, worker, self._clock() + self.lease_seconds)
            record = self._records[request_id]
            record.deliveries.append((worker, lease))
            return request_id, lease, dict(record.payload)

    def _expire(self) -> None:
        now = self._clock()
        for request_id, (lease, worker, expires) in list(self._leased.items()):
            if expires <= now:
                del self._leased[request_id]
                self._records[request_id].outcomes.append(Outcome("expired", worker, lease))
                self._ready.insert(0, request_id)

    def _current(self, request_id: str, lease: str) -> bool:
        held = self._leased.get(request_id)
        return held is not None and held[0] == lease

    def complete(self, request_id: str, lease: str, worker: str, result: Any, draining: bool) -> bool:
        """Record the result; False (stale) unless ``lease`` is the request's current lease."""
        with self._lock:
            record = self._record(request_id)
            accepted = self._current(request_id, lease)
            record.outcomes.append(Outcome("complete", worker, lease, draining, accepted))
            record.results.append(result)
            if accepted:
                del self._leased[request_id]
                self._done.add(request_id)
            return accepted

    def hand_back(self, request_id: str, lease: str, worker: str, draining: bool) -> bool:
        """Make the request visible again at once; False (ignored) for a stale lease."""
        with self._lock:
            record = self._record(request_id)
            accepted = self._current(request_id, lease)
            record.outcomes.append(Outcome("hand-back", worker, lease, draining, accepted))
            if accepted:
                del self._leased[request_id]
                self._ready.insert(0, request_id)
            return accepted

    def _record(self, request_id: str) -> Record:
        record = self._records.get(request_id)
        if record is None:
            raise KeyError(f"unknown request id {request_id!r}")
        return record

    # --- what the test reads -----------------------------------------------------------------------

    def drained(self) -> bool:
        """Every request is done: none is ready or leased (an expired lease counts as ready)."""
        with self._lock:
            self._expire()
            return not self._ready and not self._leased

    def records(self) -> dict[str, Record]:
        with self._lock:
            return {
                request_id: Record(r.payload, list(r.deliveries), list(r.outcomes), list(r.results))
                for request_id, r in self._records.items()
            }

    def holding(self) -> dict[str, Held]:
        """Worker -> the request it holds a live lease on."""
        with self._lock:
            now = self._clock()
            return {
                worker: Held(rid, dict(self._records[rid].payload), now - (expires - self.lease_seconds))
                for rid, (_, worker, expires) in self._leased.items()
                if expires > now
            }

    def taken_at_least_once(self, request_ids: list[str]) -> int:
        """How many of ``request_ids`` a worker has taken (the rest were never delivered)."""
        with self._lock:
            return sum(bool(self._records[i].deliveries) for i in request_ids)

    def problems(self) -> list[str]:
        """Every request served twice or never, and every result that is not the request's own."""
        found = []
        for request_id, record in sorted(self.records().items()):
            completions = record.count("complete")
            if completions == 0:
                found.append(f"{request_id}: never completed ({_history(record)})")
            elif completions > 1:
                found.append(f"{request_id}: completed {completions} times ({_history(record)})")
            found.extend(
                f"{request_id}: result {result!r} is not {request_id}'s"
                for result in record.results
                if result != expected_result(request_id)
            )
        return found


def expected_result(request_id: str) -> str:
    """What serving a request yields; the worker program computes it, the oracle checks it."""
    return f"served {request_id}"


def _history(record: Record) -> str:
    outcomes = ", ".join(
        f"{o.kind} by {o.worker}" + (" (stale)" if not o.accepted else "") for o in record.outcomes
    )
    return f"{len(record.deliveries)} deliveries; {outcomes or 'no outcome'}"


class _Handler(BaseHTTPRequestHandler):
    queue: CountingQueue

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        try:
            if self.path == "/take":
                taken = self.queue.take(str(body["worker"]))
                if taken is None:
                    self._reply(HTTPStatus.NO_CONTENT)
                else:
                    self._reply(HTTPStatus.OK, {"id": taken[0], "lease": taken[1], "payload": taken[2]})
            elif self.path == "/complete":
                ok = self.queue.complete(
                    body["id"], body["lease"], body["worker"], body.get("result"), bool(body.get("draining"))
                )
                self._reply(HTTPStatus.OK if ok else HTTPStatus.CONFLICT, {"accepted": ok})
            elif self.path == "/hand-back":
                ok = self.queue.hand_back(
                    body["id"], body["lease"], body["worker"], bool(body.get("draining"))
                )
                self._reply(HTTPStatus.OK if ok else HTTPStatus.CONFLICT, {"accepted": ok})
            else:
                self._reply(HTTPStatus.NOT_FOUND, {"error": f"no route {self.path}"})
        except (KeyError, ValueError) as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": str(exc)})

    def _reply(self, status: HTTPStatus, body: Mapping[str, Any] | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve(queue: CountingQueue, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``queue`` over HTTP on a free port for the duration of the block; yields its base URL."""
    handler = type("Handler", (_Handler,), {"queue": queue})
    server = ThreadingHTTPServer((host, 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="counting-queue", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
