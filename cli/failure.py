"""The one line that says why a Pulumi operation failed. Pure.

An engine failure arrives as many lines: the provider's Python traceback (in the engine's error
diagnostics and on stdout), the engine's own ``error:`` lines, and noise that only says that something
failed. People and CI logs need the cause: the exception a provider raised, else the engine's error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A Python exception's last traceback line ("together_clusters.provider.errors.TransportError: GET ... failed"),
# or the one line the provider reports an expected error in, as the engine prefixes it ("Preview failed:
# ServerError: Together API error 503 ...").
_EXCEPTION_LINE = re.compile(
    r"^(?:[A-Z][\w ]* failed: )?((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Failure|Timeout)\w*: .+)"
)
_ERROR_LINE = re.compile(r"\berror: (\S.*)")
# Engine lines that only say that something failed, not what.
_NOISE = (
    "traceback (most recent call last)",
    "update failed",
    "preview failed",
    "refresh failed",
    "resource monitor has terminated",
    "errored",
    "an error occurred",
)

# Prefixes that wrap the cause itself.
_WRAPPERS = ("error: ", "preview failed: ", "update failed: ", "refresh failed: ")


def cause_line(*texts: str) -> str:
    """The cause of a failure, on one line, from the texts that describe it (most telling first)."""
    lines = [ln.strip() for text in texts for ln in text.splitlines() if ln.strip()]
    for line in lines:
        exception = _EXCEPTION_LINE.match(line)
        if exception is not None:
            return exception.group(1)
    for message in _error_messages(lines):
        return message
    return lines[-1] if lines else "no output from the engine"


def _error_messages(lines: Iterable[str]) -> Iterable[str]:
    for line in lines:
        found = _ERROR_LINE.search(line)
        if found is None:
            continue
        message = found.group(1).strip()
        # "error: error: x" happens when the engine wraps a provider's message, "Preview failed: x" when
        # pulumi-kubernetes does.
        while message.lower().startswith(_WRAPPERS):
            message = message.split(": ", 1)[1].strip()
        if message and not any(n in message.lower() for n in _NOISE):
            yield message
