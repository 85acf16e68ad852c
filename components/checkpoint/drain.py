"""The SIGTERM contract for batch-inference workers: finish the request in flight or hand it back.

After SIGTERM the worker takes no new request. The request in flight may run until the drain budget
(DRAIN_BUDGET_SECONDS, set by the component below the grace period) is spent; if it has not finished
by then it is handed back to its queue so another worker retries it, and the worker exits.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Generic, TypeVar

from ..platform import GRACE_PERIOD_LIMIT_SECONDS
from .contract import ENV_DRAIN_BUDGET, drain_budget_seconds

log = logging.getLogger(__name__)

R = TypeVar("R")


class RequestDrain(Generic[R]):
    """Runs a fetch/handle loop that stops cleanly on SIGTERM."""

    def __init__(self, budget_seconds: float) -> None:
        self.budget_seconds = budget_seconds
        self.stopping = threading.Event()
        self._deadline: float | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RequestDrain[R]:
        """Read DRAIN_BUDGET_SECONDS; without it, assume the platform's grace limit and no preStop."""
        value = (os.environ if environ is None else environ).get(ENV_DRAIN_BUDGET)
        return cls(float(value) if value else float(drain_budget_seconds(GRACE_PERIOD_LIMIT_SECONDS, 0)))

    def install(self) -> RequestDrain[R]:
        """Route SIGTERM to :meth:`stop`; call from the main thread."""
        signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop taking requests; the one in flight has ``budget_seconds`` from now."""
        if not self.stopping.is_set():
            self._deadline = time.monotonic() + self.budget_seconds
            self.stopping.set()
            log.warning("stopping: no new requests; %.0fs for the one in flight", self.budget_seconds)

    def remaining(self) -> float | None:
        """Seconds left for the request in flight, or None while not stopping."""
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def run(
        self,
        fetch: Callable[[], R | None],
        handle: Callable[[R], None],
        hand_back: Callable[[R], None],
        poll_seconds: float = 0.2,
    ) -> bool:
        """Process requests until stopped; return False if a request had to be handed back.

        ``fetch`` should block briefly and return None when idle. ``hand_back`` must make the
        request visible to other workers again (e.g. nack it, or reset its visibility timeout).
        A request whose ``handle`` raises is handed back, then the error propagates.
        """
        while not self.stopping.is_set():
            request = fetch()
            if request is None:
                continue
            if self.stopping.is_set():
                hand_back(request)
                return False
            failure: list[BaseException] = []

            def work(request: R = request, failure: list[BaseException] = failure) -> None:
                try:
                    handle(request)
                except BaseException as e:  # re-raised in the loop's thread
                    failure.append(e)

            worker = threading.Thread(target=work, name="request", daemon=True)
            worker.start()
            while worker.is_alive():
                worker.join(poll_seconds)
                left = self.remaining()
                if worker.is_alive() and left is not None and left <= 0:
                    log.warning("request still running when the drain budget ran out; handing it back")
                    hand_back(request)
                    return False
            if failure:
                hand_back(request)
                raise failure[0]
        return True
