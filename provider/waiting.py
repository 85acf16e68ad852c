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

from .errors import WaitTimeoutError

T = TypeVar("T")


@dataclass(frozen=True)
class PollSchedule:
    """First poll after ``initial`` seconds, growing by ``factor`` up to ``maximum``."""

    initial: float = 1.0
    factor: float = 1.5
    maximum: float = 15.0

    def delays(self) -> Callable[[], float]:
        current = [self.initial]

        def next_delay() -> float:
            delay = current[0]
            current[0] = min(current[0] * self.factor, self.maximum)
            return delay

        return next_delay


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

    ``fetch`` may raise to stop the wait early (e.g. a failed provisioning phase). Progress is
    reported whenever ``describe`` of the result changes.
    """
    start = clock()
    deadline = start + timeout_s
    next_delay = (schedule or PollSchedule()).delays()
    last_seen = None
    while True:
        value = fetch()
        seen = describe(value)
        if done(value):
            return value
        if seen != last_seen:
            progress(f"{what}: {seen} ({clock() - start:.0f}s)")
            last_seen = seen
        remaining = deadline - clock()
        if remaining <= 0:
            raise WaitTimeoutError(f"{what}: not done after {timeout_s:.0f}s; last seen: {seen}")
        sleep(min(next_delay(), remaining))
