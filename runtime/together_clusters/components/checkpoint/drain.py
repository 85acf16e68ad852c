"""The SIGTERM contract for batch-inference workers: finish the request in flight or hand it back.

After SIGTERM the worker takes no new request. The request in flight may run until the drain budget
(DRAIN_BUDGET_SECONDS, set by the component below the grace period) less a stop reserve; then it is
asked to stop (its ``cancelled`` event is set). A request is handed back to its queue only once its
thread has stopped, and completed (``complete``, the one place a result is delivered) only if it
finished: never both, so no request is served twice. A handler that ignores the request to stop is
neither handed back nor completed: the process exits and the queue's own redelivery (visibility
timeout, unacked message) brings the request back, so none is lost either.
"""

from __future__ import annotations

import inspect
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any, Generic, TypeVar

from .contract import ENV_DRAIN_BUDGET, GRACE_PERIOD_LIMIT_SECONDS, drain_budget_seconds

log = logging.getLogger(__name__)

R = TypeVar("R")


MAX_STOP_RESERVE_SECONDS = 10.0


class RequestDrain(Generic[R]):
    """Runs a fetch/handle loop that stops cleanly on SIGTERM.

    ``stop_seconds`` is the end of the budget kept for a cancelled request's thread to stop (default a
    fifth of the budget, at most 10 s).
    """

    def __init__(self, budget_seconds: float, stop_seconds: float | None = None) -> None:
        self.budget_seconds = budget_seconds
        self.stop_seconds = (
            min(MAX_STOP_RESERVE_SECONDS, budget_seconds / 5) if stop_seconds is None else stop_seconds
        )
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
        handle: Callable[..., Any],
        hand_back: Callable[[R], None],
        complete: Callable[[R, Any], None] | None = None,
        poll_seconds: float = 0.2,
    ) -> bool:
        """Process requests until stopped; return False if the request in flight did not finish.

        ``fetch`` should block briefly and return None when idle. ``handle(request)`` or
        ``handle(request, cancelled)`` computes a result (it should return or raise soon after
        ``cancelled`` is set); ``complete(request, result)`` delivers it and acknowledges the request.
        ``hand_back`` must make the request visible to other workers again (nack it, reset its
        visibility timeout). A request whose ``handle`` raises is handed back, then the error propagates.
        """
        takes_cancel = len(inspect.signature(handle).parameters) >= 2
        while not self.stopping.is_set():
            request = fetch()
            if request is None:
                continue
            if self.stopping.is_set():
                hand_back(request)
                return False
            cancelled = threading.Event()
            outcome: dict[str, Any] = {}

            def work(
                request: R = request,
                cancelled: threading.Event = cancelled,
                outcome: dict[str, Any] = outcome,
            ) -> None:
                try:
                    outcome["result"] = handle(request, cancelled) if takes_cancel else handle(request)
                except BaseException as e:  # re-raised or handed back in the loop's thread
                    outcome["error"] = e

            worker = threading.Thread(target=work, name="request", daemon=True)
            worker.start()
            while worker.is_alive():
                worker.join(poll_seconds)
                left = self.remaining()
                if worker.is_alive() and left is not None and left <= self.stop_seconds:
                    return self._stop_request(request, worker, cancelled, outcome, hand_back, complete)
            if "error" in outcome:
                hand_back(request)
                raise outcome["error"]
            if complete is not None:
                complete(request, outcome.get("result"))
        return True

    def _stop_request(
        self,
        request: R,
        worker: threading.Thread,
        cancelled: threading.Event,
        outcome: dict[str, Any],
        hand_back: Callable[[R], None],
        complete: Callable[[R, Any], None] | None,
    ) -> bool:
        log.warning("drain budget nearly spent: asking the request in flight to stop")
        cancelled.set()
        worker.join(max(0.0, self.remaining() or 0.0))
        if worker.is_alive():
            log.error(
                "the request's thread did not stop: not handing it back (it might still finish); "
                "the queue redelivers it once this process is gone"
            )
            return False
        if "error" in outcome:
            hand_back(request)
            return False
        if complete is not None:  # it finished just in time
            complete(request, outcome.get("result"))
        return True
