"""The ASGI layer in front of the API: a request id on every reply, and the injected HTTP faults.

It wraps the whole app (outside FastAPI's own middleware), so it sees the raw connection: a fault can hold
a request before it takes effect (a slow commit), let it take effect and then delay, replace, cut, garble or
drop its reply (see :class:`together_clusters.emulator.faults.FaultSpec`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .faults import FaultRule
from .http_errors import error_response
from .state import Platform

_log = logging.getLogger("together_clusters.emulator")
# Paths the fault injector never touches, so tests can always steer the emulator.
NEVER_FAULTED = ("/_emulator", "/healthz", "/openapi.json", "/docs")
# What a proxy in front of the API might answer instead of JSON.
_NOT_JSON = b"<html><body><h1>502 Bad Gateway</h1></body></html>"


class FaultInjector:
    """ASGI middleware: adds ``x-request-id`` to every reply and applies the platform's pending faults."""

    def __init__(self, app: ASGIApp, platform: Platform) -> None:
        self.app = app
        self.platform = platform

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = f"req_{secrets.token_hex(12)}"

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append("x-request-id", request_id)
            await send(message)

        path: str = scope["path"]
        fault = None if path.startswith(NEVER_FAULTED) else self.platform.take_fault(scope["method"], path)
        try:
            if fault is None:
                await self.app(scope, receive, send_with_id)
            else:
                await self._with_fault(fault, scope, receive, send, send_with_id)
        except Exception:
            # FastAPI has answered it (500, with the request id) and re-raises it for the log.
            _log.exception("unhandled error in %s %s", scope["method"], path)

    async def _with_fault(
        self, fault: FaultRule, scope: Scope, receive: Receive, send: Send, send_with_id: Send
    ) -> None:
        # The whole request is read first, so it takes effect even if the client gives up meanwhile.
        replay = await _buffered(receive)
        if not fault.commits_first:
            if fault.delay_s:
                await asyncio.sleep(fault.delay_s)
            if fault.reply == "reset":
                await _drop_connection(send, {"status": 502, "headers": []}, b"")
            elif fault.status is not None:
                await _error(fault, scope, replay, send_with_id)
            else:
                await self.app(scope, replay, send_with_id)
            return
        start, body = await _committed(self.app, scope, replay)
        if fault.delay_s:
            await asyncio.sleep(fault.delay_s)
        if fault.reply == "drop":
            await _drop_connection(send, start, body)
        elif fault.status is not None:
            await _error(fault, scope, replay, send_with_id)
        else:
            await _send_reply(send_with_id, start, _garbled(fault, body))


async def _buffered(receive: Receive) -> Receive:
    """Read the request body now; the returned ``receive`` replays it, then waits for a disconnect."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            break

    async def replay() -> Message:
        if messages:
            return messages.pop(0)
        return await receive()

    return replay


async def _committed(app: ASGIApp, scope: Scope, receive: Receive) -> tuple[Message, bytes]:
    """Run the request to the end and capture its reply instead of sending it."""
    start: Message = {}
    chunks: list[bytes] = []

    async def capture(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    try:
        await app(scope, receive, capture)
    except Exception:
        if not start:
            raise
        _log.exception("unhandled error in %s %s", scope["method"], scope["path"])
    return start, b"".join(chunks)


def _garbled(fault: FaultRule, body: bytes) -> bytes:
    """The reply body as the fault leaves it."""
    if fault.reply == "truncated":
        return body[: len(body) // 2]
    if fault.reply == "invalid_json":
        return _NOT_JSON
    if fault.reply == "patch" and fault.patch is not None:
        try:
            decoded = json.loads(body)
        except ValueError:
            return body
        if isinstance(decoded, dict):
            return json.dumps(decoded | fault.patch).encode()
    return body


async def _send_reply(send: Send, start: Message, body: bytes) -> None:
    headers = MutableHeaders(raw=list(start.get("headers", [])))
    headers["content-length"] = str(len(body))
    await send({"type": "http.response.start", "status": start["status"], "headers": headers.raw})
    await send({"type": "http.response.body", "body": body})


async def _error(fault: FaultRule, scope: Scope, receive: Receive, send: Send) -> None:
    assert fault.status is not None
    headers = {"retry-after": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
    message = fault.message or f"injected fault: HTTP {fault.status}"
    await error_response(fault.status, message, None, headers=headers)(scope, receive, send)


async def _drop_connection(send: Send, start: Message, body: bytes) -> None:
    """Close the connection without a reply, as a reset or a crashed proxy would."""
    # Uvicorn's ``send`` belongs to the request's cycle, which holds the connection's transport.
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if isinstance(transport, asyncio.BaseTransport):
        transport.close()
        # Let the server see the connection is gone, so it does not try to answer in our place.
        await asyncio.sleep(0)
        return
    # Elsewhere: announce the whole reply, send a part of it, and stop; the server closes the connection.
    _log.warning("cannot reach the connection to drop it; cutting the reply short instead")
    headers = MutableHeaders(raw=list(start.get("headers", [])))
    headers["content-length"] = str(len(body))
    await send({"type": "http.response.start", "status": start["status"], "headers": headers.raw})
    await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
