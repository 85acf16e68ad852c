"""When to retry an API call and how long to wait first. Pure: no I/O, no clock."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# 429 means the request was not processed; 502/503/504 usually mean it never reached the service; a
# 500 may have been processed, which sending an idempotent request again does not change.
RETRYABLE_STATUS: frozenset[int] = frozenset({429, 500, 502, 503, 504})
# Methods that are safe to send again. POST (create) is not: it is reconciled instead.
IDEMPOTENT_METHODS: frozenset[str] = frozenset({"GET", "PUT", "DELETE", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, capped, honouring ``Retry-After``.

    ``max_attempts`` counts the first try. ``max_retry_after`` caps a server's hint, so a
    misbehaving proxy cannot park a deployment for an hour.
    """

    max_attempts: int = 6
    initial_backoff: float = 0.5
    max_backoff: float = 20.0
    max_retry_after: float = 120.0

    def backoff(
        self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` is 1 for the first retry)."""
        if retry_after is not None and math.isfinite(retry_after):
            return min(max(retry_after, 0.0), self.max_retry_after)
        ceiling = min(self.max_backoff, self.initial_backoff * (2 ** (attempt - 1)))
        return (rng or random).uniform(ceiling / 2, ceiling)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: either delta-seconds or an HTTP date. ``None`` if absent or garbled."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        # "nan" and "inf" parse as floats but are no usable wait.
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def should_retry_status(method: str, status_code: int) -> bool:
    """Whether a reply with this status may be retried for this method."""
    return method.upper() in IDEMPOTENT_METHODS and status_code in RETRYABLE_STATUS
