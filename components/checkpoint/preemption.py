"""Save the latest state when the pod is told to stop, then exit non-zero.

On a preemptible node SIGTERM arrives when the node is cordoned; the node is deleted once the grace
period ends. The handler takes the caller's latest consistent state, saves it within the save
budget (set below the grace period by the components) and exits with 143 so that the Job never
counts the interrupted pod as a completion. A save that overruns its budget is abandoned: without
its manifest it will be ignored and the previous checkpoint used.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from .checkpointer import Checkpointer, FileData
from .contract import PREEMPTED_EXIT_CODE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot:
    """The state to save: a step number and the files that make it up."""

    step: int
    files: Mapping[str, FileData]
    metadata: Mapping[str, Any] = field(default_factory=dict)


class PreemptionHandler:
    """A SIGTERM handler that checkpoints ``snapshot()`` within ``budget_seconds`` and exits.

    Only the first SIGTERM counts: a second one while saving is ignored, so the budget runs from the first.
    """

    def __init__(
        self,
        checkpointer: Checkpointer,
        snapshot: Callable[[], Snapshot | None],
        budget_seconds: float | None = None,
        exit_code: int = PREEMPTED_EXIT_CODE,
        exit: Callable[[int], Any] = os._exit,
    ) -> None:
        self.checkpointer = checkpointer
        self.snapshot = snapshot
        self.budget_seconds = (
            checkpointer.config.save_budget_seconds if budget_seconds is None else budget_seconds
        )
        self.exit_code = exit_code
        self._exit = exit
        self.stopping = threading.Event()
        self._saving = threading.Lock()

    def install(self) -> PreemptionHandler:
        """Route SIGTERM to this handler; call from the main thread."""
        signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.stopping.set()
        self.save_and_exit()

    def save_and_exit(self) -> None:
        """Save the latest state within the budget, then exit with ``exit_code`` (once, however often called).

        A repeated call, such as a second SIGTERM whose handler runs on top of the first, returns at once.
        """
        # Non-blocking: a nested handler runs in the thread that holds the lock and must not wait on it.
        if not self._saving.acquire(blocking=False):
            return
        started = time.monotonic()
        try:
            log.warning("SIGTERM: saving the latest state within %.0fs", self.budget_seconds)
            outcome: dict[str, Any] = {}
            # A thread, so that neither taking the snapshot nor a save stuck on storage can hold the
            # process past its budget.
            saver = threading.Thread(
                target=self._save, args=(outcome,), name="checkpoint-on-sigterm", daemon=True
            )
            saver.start()
            saver.join(max(0.0, self.budget_seconds - (time.monotonic() - started)))
            if saver.is_alive():
                log.error("checkpoint save overran its %.0fs budget; abandoning it", self.budget_seconds)
            elif "error" in outcome:
                log.error("checkpoint save failed: %r", outcome["error"])
            elif "name" not in outcome:
                log.warning("nothing to save yet; exiting")
            else:
                log.warning(
                    "saved checkpoint %s at step %d in %.1fs (budget %.0fs)",
                    outcome["name"],
                    outcome["step"],
                    time.monotonic() - started,
                    self.budget_seconds,
                )
        finally:
            for handler in logging.getLogger().handlers:
                handler.flush()
            sys.stdout.flush()
            sys.stderr.flush()
            self._exit(self.exit_code)

    def _save(self, outcome: dict[str, Any]) -> None:
        try:
            snapshot = self.snapshot()
            if snapshot is not None:
                outcome["step"] = snapshot.step
                outcome["name"] = self.checkpointer.save(snapshot.step, snapshot.files, snapshot.metadata)
        except BaseException as e:  # reported by save_and_exit; the process exits either way
            outcome["error"] = e
