"""The plugin's gRPC server: the SDK's ``server.main`` serving ``TogetherProvider``, with one mend.

The SDK's servicer answers any exception of a provider call with its message and the Python frames
(``_raise_with_traceback``). An expected error (a ``TogetherError``: a refusal, a timeout, an API error, each
with its fix in the message) must reach the user as the one line the dynamic provider gives it
(``oneline.one_line``); a bug keeps its frames. :func:`install` wraps the servicer's calls so that the
exception the SDK raises *from* a ``TogetherError`` ends the call with that one line instead.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import grpc
from pulumi.provider.experimental import server

from ..errors import TogetherError
from ..oneline import one_line
from .provider import TogetherProvider, version

CALLS = (
    "Check",
    "Diff",
    "Create",
    "Read",
    "Update",
    "Delete",
    "Configure",
    "CheckConfig",
    "DiffConfig",
    "Construct",
)
"""The servicer's methods that run provider code."""


def _expected(error: BaseException) -> TogetherError | None:
    """The ``TogetherError`` behind ``error`` (the SDK re-raises it as a plain ``Exception``), if any."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, TogetherError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _one_line_for_expected(
    call: Callable[[Any, Any, Any], Coroutine[Any, Any, Any]],
) -> Callable[[Any, Any, Any], Coroutine[Any, Any, Any]]:
    @functools.wraps(call)
    async def answered(self: Any, request: Any, context: Any) -> Any:
        try:
            return await call(self, request, context)
        except Exception as exc:
            expected = _expected(exc)
            if expected is None:
                raise
            await context.abort(grpc.StatusCode.UNKNOWN, one_line(expected))

    answered.__wrapped_for_one_line__ = True  # type: ignore[attr-defined]
    return answered


def install() -> None:
    """Make the SDK's servicer end a call that failed with an expected error on its one line (idempotent)."""
    for name in CALLS:
        call = getattr(server.ProviderServicer, name)
        if not getattr(call, "__wrapped_for_one_line__", False):
            setattr(server.ProviderServicer, name, _one_line_for_expected(call))


def main(argv: list[str] | None = None) -> None:
    """Serve the provider to the engine that started this process (its address is the first argument)."""
    install()
    server.main(sys.argv[1:] if argv is None else argv, version(), TogetherProvider())
