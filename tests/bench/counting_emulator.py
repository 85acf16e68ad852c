"""The emulator as shipped, behind an ASGI middleware that records every API request it answers.

    python -m tests.bench.counting_emulator --speed 600      # prints the base URL, then serves

``GET /_bench/requests`` returns the requests seen since the last ``DELETE /_bench/requests``: method,
route (cluster ids replaced by ``{id}``), and when each started and ended (``time.monotonic``, which is
one clock for every process of the machine). The emulator itself is not changed: the recording
happens around its ASGI app, and admin calls (``/_emulator``) are not counted.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from typing import Any

import uvicorn

from together_clusters.emulator.app import asgi_app
from together_clusters.emulator.server import base_url_of, bind_socket
from together_clusters.emulator.state import Platform

_CLUSTER_ID = re.compile(r"^(/v1/compute/clusters/)[^/]+$")
_ADMIN = "/_bench/requests"

Scope = dict[str, Any]


def route_of(path: str) -> str:
    """The route a path belongs to: ``/v1/compute/clusters/abc`` -> ``/v1/compute/clusters/{id}``."""
    return _CLUSTER_ID.sub(r"\1{id}", path)


class CountingMiddleware:
    """Records each API request with its start and end time; serves the record at ``/_bench/requests``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path == _ADMIN:
            await self._serve_record(scope, send)
            return
        if path.startswith("/_emulator"):
            await self.app(scope, receive, send)
            return
        entry: dict[str, Any] = {"method": scope["method"], "route": route_of(path), "path": path}
        entry["start"] = time.monotonic()

        async def send_and_time(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                entry["end"] = time.monotonic()

        try:
            await self.app(scope, receive, send_and_time)
        finally:
            entry.setdefault("end", time.monotonic())
            with self._lock:
                self._seen.append(entry)

    async def _serve_record(self, scope: Scope, send: Any) -> None:
        with self._lock:
            body = json.dumps({"requests": self._seen}).encode()
            if scope["method"] == "DELETE":
                self._seen = []
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--speed", type=float, default=600.0)
    args = parser.parse_args(argv)
    platform = Platform(speed=args.speed)
    sock = bind_socket("127.0.0.1", 0)
    print(base_url_of(sock), flush=True)
    app = CountingMiddleware(asgi_app(platform))
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
