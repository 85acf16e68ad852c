"""A misbehaving HTTP proxy for tests: it sits between a client and an API and breaks replies on purpose.

    with FaultProxy(upstream="http://127.0.0.1:8080") as proxy:
        proxy.add(Fault("truncate", method="POST", path="/v1/compute/clusters"))
        client = TogetherClient(base_url=proxy.url, ...)

Each ``Fault`` applies to the next ``count`` requests that match its method and path prefix:

- ``status``: answer ``status`` without forwarding (a 5xx or 429 storm with ``count`` > 1); ``retry_after``
  is sent verbatim as the ``Retry-After`` header, so ``"nan"`` is possible.
- ``reset``: close the connection with a TCP reset, without forwarding.
- ``drop``: forward the request (the API acts on it), then close the connection without replying.
- ``truncate``: forward, then send the first half of the body of a 2xx reply with a matching length.
- ``delay``: wait ``delay_s`` before forwarding.
- ``stale``: answer a GET with the reply this path gave when the fault was added (a listing that lags).
- ``twice``: forward the request, then forward it again and answer the second reply (a middlebox that
  retried on its own).

The proxy is independent of the code under test: it speaks plain HTTP/1.1 through the standard library.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Literal

import httpx

FaultKind = Literal["status", "reset", "drop", "truncate", "delay", "stale", "twice"]
# Hop-by-hop headers (RFC 9110) and those the proxy recomputes.
_NOT_FORWARDED = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "host",
    "content-encoding",
}


class _QuietServer(ThreadingHTTPServer):
    """Connections the proxy breaks on purpose are not errors worth a traceback."""

    def handle_error(self, request: object, client_address: object) -> None:
        return


@dataclass
class Fault:
    """One kind of misbehaviour for the next ``count`` matching requests."""

    kind: FaultKind
    method: str | None = None
    path: str = "/"
    count: int = 1
    status: int = 503
    retry_after: str | None = None
    delay_s: float = 0.5
    stale_body: bytes | None = field(default=None, repr=False)

    def matches(self, method: str, path: str) -> bool:
        # A stale reply stands for one resource (a listing): only its own path, not the ones below it.
        where = path == self.path if self.kind == "stale" else path.startswith(self.path)
        return where and (self.method is None or self.method == method)


class FaultProxy:
    """A threaded proxy on 127.0.0.1 forwarding to ``upstream`` (which can be changed while it runs)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self.injected: dict[str, int] = {}
        #: Every request seen, as (method, path without query), in order.
        self.requests: list[tuple[str, str]] = []
        self._forward = httpx.Client(timeout=60)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
                return

            def _any(self) -> None:
                proxy._handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any  # noqa: N815 - the stdlib's names

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    # --- steering -----------------------------------------------------------------------------

    def add(self, fault: Fault) -> Fault:
        if fault.kind == "stale" and fault.stale_body is None:
            fault.stale_body = self._forward.get(
                f"{self.upstream}{fault.path}", headers=self.stale_headers
            ).content
        with self._lock:
            self._faults.append(fault)
        return fault

    #: Headers for the snapshot a ``stale`` fault replays (set the API key here).
    stale_headers: dict[str, str] = {}

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def _take(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.count -= 1
                    if fault.count <= 0:
                        self._faults.remove(fault)
                    self.injected[fault.kind] = self.injected.get(fault.kind, 0) + 1
                    return fault
        return None

    # --- serving ------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        method, path = handler.command, handler.path
        with self._lock:
            self.requests.append((method, path.split("?")[0]))
        fault = self._take(method, path.split("?")[0])
        kind = fault.kind if fault else None
        if fault is not None and kind == "status":
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            self._reply(
                handler, fault.status, b'{"error": {"message": "injected by the fault proxy"}}', headers
            )
            return
        if kind == "reset":
            self._reset(handler)
            return
        if fault is not None and kind == "stale" and method == "GET" and fault.stale_body is not None:
            self._reply(handler, 200, fault.stale_body, {"Content-Type": "application/json"})
            return
        if fault is not None and kind == "delay":
            time.sleep(fault.delay_s)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _NOT_FORWARDED}
        try:
            upstream = self._forward.request(method, f"{self.upstream}{path}", content=body, headers=headers)
            if kind == "twice":
                upstream = self._forward.request(
                    method, f"{self.upstream}{path}", content=body, headers=headers
                )
        except httpx.HTTPError:
            self._reply(handler, 502, b'{"error": {"message": "upstream unreachable"}}', {})
            return
        if kind == "drop":
            handler.close_connection = True
            self._reset(handler)
            return
        content = upstream.content
        if kind == "truncate" and upstream.is_success:
            content = content[: len(content) // 2]
        reply_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _NOT_FORWARDED}
        self._reply(handler, upstream.status_code, content, reply_headers)

    @staticmethod
    def _reply(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
        handler.wfile.flush()

    @staticmethod
    def _reset(handler: BaseHTTPRequestHandler) -> None:
        handler.close_connection = True
        sock = handler.connection
        # Linger 0: close sends RST rather than FIN, as a crashed middlebox would.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._forward.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
