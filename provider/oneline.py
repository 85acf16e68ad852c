"""Expected errors reach the user as one line, not inside the provider host's traceback.

The SDK's dynamic-provider host (``python -m pulumi.dynamic``) answers every exception of a provider call
with ``traceback.format_exc()``: a ``TogetherError`` (a refusal, a timeout, an API error, each with its
fix in the message) arrived inside 15 lines of frames. :func:`install` makes that host's ``traceback``
give ``<ErrorType>: <message>`` for a ``TogetherError`` and the whole traceback for anything else (a bug,
which needs its frames). Installed by the provider on its first call, in the host process only.
"""

from __future__ import annotations

import sys
import traceback
from types import ModuleType
from typing import Any

from together_clusters.errors import AuthenticationError, TogetherError, TransportError, UnreadableReplyError

from .settings import API_KEY_CONFIG, API_KEY_ENV, BASE_URL_CONFIG, BASE_URL_ENV


class _OneLineForExpected:
    """``traceback`` as the host module sees it, with ``format_exc`` shortened for expected errors."""

    def __init__(self, real: ModuleType) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def format_exc(self, limit: int | None = None, chain: bool = True) -> str:
        error = sys.exc_info()[1]
        if isinstance(error, TogetherError):
            return one_line(error)
        return self._real.format_exc(limit, chain)


def one_line(error: TogetherError) -> str:
    """``<ErrorType>: <message>`` on one line, with the setting to change when the API refused the key or
    could not be reached (the client's message says what happened, not where the key or URL came from)."""
    text = " ".join(str(error).split())
    fix = _setting_to_change(error)
    return f"{type(error).__name__}: {text}" + (f" ({fix})" if fix and fix not in text else "")


def _setting_to_change(error: TogetherError) -> str | None:
    if isinstance(error, AuthenticationError):
        return f"set a valid key in {API_KEY_ENV} or `pulumi config set --secret {API_KEY_CONFIG} <key>`"
    if isinstance(error, TransportError) and not isinstance(error, UnreadableReplyError):
        return f"check {BASE_URL_ENV} or `pulumi config set {BASE_URL_CONFIG} <url>`"
    return None


def install(host: ModuleType | None = None) -> None:
    """Shorten the dynamic-provider host's reports of expected errors (no-op outside that host)."""
    host = host or sys.modules.get("__main__")
    if host is None or not hasattr(host, "_abort_with_traceback"):
        return
    if getattr(host, "traceback", None) is traceback:
        host.traceback = _OneLineForExpected(traceback)  # type: ignore[attr-defined]
