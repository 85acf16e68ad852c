"""Save the latest state when the pod is told to stop, then exit 143.

On a preemptible node SIGTERM arrives when the node is cordoned; the node is deleted once the grace
period ends. The handler takes the caller's latest consistent state, saves it within the save
budget (set below the grace period by the components) and exits with 143, which the Jobs' pod
failure policy ignores (a plain pod delete sets no DisruptionTarget condition, so the exit code is
what tells the Job controller "preempted, not broken"). A save that overruns its budget is abandoned
and the process still exits 143 before the kubelet's SIGKILL (137, which would count): without its
manifest the torn checkpoint is ignored and the previous one used.

The signal handler itself only writes one byte to a pipe. Python runs handlers in the main thread
between bytecodes, possibly while that thread holds a lock (the logging handler's, stdout's, an Event's,
the caller's own); anything in the handler that takes a lock, or waits for work that does, can wait
on that lock until the budget runs out. A thread started at ``install()`` waits on the pipe and does
the work. For the same reason the SIGTERM path writes its report straight to file descriptor 2
instead of through ``logging``, and leaves pruning to the next run.

After SIGTERM the process never exits before the save has finished (or failed, or overrun its budget), and
never exits 0: the save's thread is handed the exit, and an ``atexit`` hook holds an interpreter whose main
thread returned (the training loop stopping at once, possibly before that thread has even started) until
the save exits the process with 143. Exit 0 would make the Job count the attempt as Succeeded and end the
run unsaved.
"""

from __future__ import annotations

import atexit
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
from .contract import PREEMPTED_EXIT_CODE, SAVED_REPORT, report

FLUSH_SECONDS = 1.0
"""How long the exit waits for buffered stdout/stderr, which another thread may hold locked."""


@dataclass(frozen=True)
class Snapshot:
    """The state to save: a step number and the files that make it up."""

    step: int
    files: Mapping[str, FileData]
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _flush_then_exit(exit: Callable[[int], Any], code: int) -> None:
    flusher = threading.Thread(target=_flush_std_streams, name="flush-before-exit", daemon=True)
    flusher.start()
    flusher.join(FLUSH_SECONDS)
    exit(code)


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


class PreemptionHandler:
    """A SIGTERM handler that checkpoints ``snapshot()`` within ``budget_seconds`` and exits 143.

    Only the first SIGTERM counts: a later one while saving is ignored, so the budget runs from the
    first. After SIGTERM the caller's loop may go on (the saved state is the snapshot taken, not the live
    one); it should stop taking steps once :attr:`stopping` is set, and may simply return: once SIGTERM has
    arrived, the interpreter waits for the save, then the process exits 143 (see the module docstring).
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
        """Set once SIGTERM has arrived: the training loop should stop taking steps."""
        self.finished = threading.Event()
        """Set once the SIGTERM save is over and ``exit`` has returned (only a test's ``exit`` returns)."""
        self._started = threading.Lock()
        self._signalled_at: float | None = None
        self._wake_write: int | None = None

    def install(self) -> PreemptionHandler:
        """Route SIGTERM to this handler; call from the main thread."""
        wake_read, self._wake_write = os.pipe()
        threading.Thread(
            target=self._wait_for_sigterm, args=(wake_read,), name="checkpoint-on-sigterm", daemon=True
        ).start()
        signal.signal(signal.SIGTERM, self._on_sigterm)
        atexit.register(self._hold_exit_for_the_save)
        return self

    def _hold_exit_for_the_save(self) -> None:
        """At interpreter exit: after SIGTERM, wait for the save to exit the process with 143."""
        if self._signalled_at is None:
            return  # no preemption: the process ends as the caller chose
        deadline = self._signalled_at + self.budget_seconds
        if self._started.acquire(blocking=False):
            # The waiting thread has not taken the signal yet: save from here (the caller's code is done,
            # so the main thread holds none of its locks).
            self.stopping.set()
            self._save_and_exit(deadline)
            return  # reached only when ``exit`` returns (in tests)
        # The save's thread exits the process (os._exit) by the deadline plus the flush; the margin covers
        # that thread being started. Only an ``exit`` that returns (in tests) gets past the wait.
        deadline += FLUSH_SECONDS + 5.0
        self.finished.wait(max(0.0, deadline - time.monotonic()))
        if not self.finished.is_set():
            self._exit(self.exit_code)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        # No lock, no logging, no allocation of note: a timestamp and one byte (see the module docstring).
        if self._signalled_at is None:
            self._signalled_at = time.monotonic()
            assert self._wake_write is not None
            os.write(self._wake_write, b"\0")

    def _wait_for_sigterm(self, wake_read: int) -> None:
        os.read(wake_read, 1)
        if not self._started.acquire(blocking=False):
            return
        self.stopping.set()
        signalled_at = self._signalled_at or time.monotonic()
        # Not a daemon: if the main thread returns meanwhile, the interpreter still waits for the exit.
        saver = threading.Thread(
            target=self._save_and_exit, args=(signalled_at + self.budget_seconds,), name="checkpoint-exit"
        )
        saver.start()

    def save_and_exit(self) -> None:
        """Save the latest state within the budget, then exit with ``exit_code`` (once, however often called)."""
        if not self._started.acquire(blocking=False):
            return
        self.stopping.set()
        self._save_and_exit(time.monotonic() + self.budget_seconds)

    def _save_and_exit(self, deadline: float) -> None:
        started = deadline - self.budget_seconds
        try:
            report(f"SIGTERM: saving the latest state within {self.budget_seconds:.0f}s")
            outcome: dict[str, Any] = {}
            # Its own thread, so that neither taking the snapshot nor a save stuck on storage can hold
            # the process past its budget.
            saver = threading.Thread(target=self._save, args=(outcome,), name="checkpoint-save", daemon=True)
            saver.start()
            saver.join(max(0.0, deadline - time.monotonic()))
            if saver.is_alive():
                report(f"checkpoint save overran its {self.budget_seconds:.0f}s budget; abandoning it")
            elif "error" in outcome:
                report(f"checkpoint save failed: {outcome['error']!r}")
            elif "name" not in outcome:
                report("nothing to save yet; exiting")
            else:
                report(
                    SAVED_REPORT.format(name=outcome["name"], step=outcome["step"]) + f" in "
                    f"{time.monotonic() - started:.1f}s (budget {self.budget_seconds:.0f}s)"
                )
        finally:
            _flush_then_exit(self._exit, self.exit_code)
            self.finished.set()  # reached only when ``exit`` returns (in tests)

    def _save(self, outcome: dict[str, Any]) -> None:
        try:
            snapshot = self.snapshot()
            if snapshot is not None:
                outcome["step"] = snapshot.step
                # No pruning here: it is not needed to resume and must not eat the budget.
                outcome["name"] = self.checkpointer.write(snapshot.step, snapshot.files, snapshot.metadata)
        except BaseException as e:  # reported by _save_and_exit; the process exits either way
            outcome["error"] = e
