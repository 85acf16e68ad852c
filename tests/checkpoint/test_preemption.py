"""PreemptionHandler in this process: one save per preemption, within the budget, and always an exit."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from together_clusters.components.checkpoint import (
    PREEMPTED_EXIT_CODE,
    Checkpointer,
    FilesystemBackend,
    PreemptionHandler,
    Snapshot,
)


@pytest.fixture
def restore_sigterm() -> Iterator[None]:
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_a_second_sigterm_while_saving_is_ignored(tmp_path: Path, restore_sigterm: None) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path), keep=5)
    exits: list[int] = []

    def snapshot() -> Snapshot:
        # The second SIGTERM arrives while the first one's save is under way.
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
        time.sleep(0.2)
        return Snapshot(7, {"s": b"seven"})

    handler = PreemptionHandler(ckpt, snapshot, budget_seconds=30, exit=exits.append).install()
    signal.raise_signal(signal.SIGTERM)
    assert handler.finished.wait(60)
    assert exits == [PREEMPTED_EXIT_CODE]
    assert len(ckpt.backend.entries()) == 1
    loaded = ckpt.latest()
    assert loaded is not None and loaded.step == 7


def test_a_snapshot_that_fails_still_exits_with_143(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    exits: list[int] = []

    def snapshot() -> Snapshot:
        raise RuntimeError("state is on the GPU")

    handler = PreemptionHandler(Checkpointer(FilesystemBackend(tmp_path)), snapshot, exit=exits.append)
    handler.save_and_exit()
    assert exits == [PREEMPTED_EXIT_CODE]
    assert "state is on the GPU" in capfd.readouterr().err


def test_a_snapshot_that_hangs_is_abandoned_within_the_budget(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    exits: list[int] = []
    release = threading.Event()

    def snapshot() -> Snapshot:
        release.wait(30)
        return Snapshot(1, {"s": b"late"})

    handler = PreemptionHandler(
        Checkpointer(FilesystemBackend(tmp_path)), snapshot, budget_seconds=0.2, exit=exits.append
    )
    try:
        handler.save_and_exit()
    finally:
        release.set()
    assert exits == [PREEMPTED_EXIT_CODE]
    assert "overran its 0s budget" in capfd.readouterr().err
