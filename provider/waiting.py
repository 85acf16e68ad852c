"""Polling with our own deadline and backoff.

The engine's ``customTimeouts`` do not reach dynamic providers, so every wait here carries its own
deadline and says what it is waiting for while it waits.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .errors import RateLimitError, ServerError, TransportError, WaitTimeoutError

T = TypeVar("T")


@dataclass(frozen=True)
class PollSchedule:
    """How long to wait before the next poll, given how long the wait has lasted.

    As long as the wait so far (at least ``first``, at most ``floor`` seconds), then a tenth of it, at
    most ``ceiling`` seconds: a state reached after ``t`` seconds is seen by ``2t`` while ``t`` is under
    ``floor`` (a quick create or delete is not held back to a whole second: four more polls in the first
    second), then at most ``max(floor, t / 10)`` late, while a long wait does not poll a busy API every
    second.
    """

    first: float = 0.1
    floor: float = 1.0
    fraction: float = 0.1
    ceiling: float = 30.0

    def delay(self, elapsed: float) -> float:
        doubling = min(self.floor, max(self.first, elapsed))
        return min(self.ceiling, max(doubling, self.fraction * elapsed))


# Errors that say nothing about the cluster: the API or the network hiccupped. A wait keeps going.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (ServerError, RateLimitError, TransportError)


def report(message: str) -> None:
    """Progress for the person running ``pulumi up``.

    ``pulumi.log`` is not available inside a dynamic provider; the engine shows what a provider
    writes to stderr.
    """
    print(message, file=sys.stderr, flush=True)


def wait_until(
    fetch: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout_s: float,
    what: str,
    describe: Callable[[T], str] = str,
    schedule: PollSchedule | None = None,
    progress: Callable[[str], None] = report,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fetch`` until ``done`` holds for its result, or raise ``WaitTimeoutError``.

    ``fetch`` may raise to stop the wait early (e.g. a failed provisioning phase). Transient errors
    (5xx, 429, no usable reply) do not end the wait: they are reported and polling goes on until
    the deadline. Progress is reported whenever what is seen changes.
    """
    schedule = schedule or PollSchedule()
    start = clock()
    deadline = start + timeout_s
    last_seen: str | None = None
    while True:
        try:
            value = fetch()
        except TRANSIENT_ERRORS as exc:
            seen = f"no answer this time ({exc})"
        else:
            if done(value):
                return value
            seen = describe(value)
        if seen != last_seen:
            progress(f"{what}: {seen} ({clock() - start:.0f}s)")
            last_seen = seen
        remaining = deadline - clock()
        if remaining <= 0:
            raise WaitTimeoutError(f"{what}: not done after {timeout_s:.0f}s; last seen: {seen}")
        sleep(min(schedule.delay(clock() - start), remaining))
