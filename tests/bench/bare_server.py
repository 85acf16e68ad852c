"""The floor of the emulator's speed: uvicorn serving fixed bytes for every GET, no framework, no state.

    python -m tests.bench.bare_server BODY_FILE     # prints its base URL, then serves BODY_FILE's bytes

Its socket is made the way asyncio makes its own (``loop.create_server``), the way any server should.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import uvicorn


def app_serving(body: bytes) -> Any:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


class _Announcing(uvicorn.Server):
    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        print(f"http://{host}:{port}", flush=True)


def main() -> None:
    body = Path(sys.argv[1]).read_bytes()
    config = uvicorn.Config(
        app_serving(body), host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="off"
    )
    _Announcing(config).run()


if __name__ == "__main__":
    main()
