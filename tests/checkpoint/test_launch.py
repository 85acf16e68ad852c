"""The launch wrapper in real processes: a launcher that exits 1 on SIGTERM (as torchrun does) ends in 143."""

from __future__ import annotations

import signal
import sys

import pytest

from together_clusters.components.checkpoint import PREEMPTED_EXIT_CODE

from .conftest import Worker

# Like torchrun's agent: on SIGTERM it raises, tears down, and the interpreter exits 1.
LAUNCHER_EXITING_1_ON_SIGTERM = """
import signal, sys, time
def stop(signum, frame):
    raise SystemExit(1)
signal.signal(signal.SIGTERM, stop)
print("RUNNING", flush=True)
time.sleep(600)
"""


def launch(*command: str) -> Worker:
    return Worker(["launch", "--", *command], {})


def test_a_launcher_that_exits_1_on_sigterm_ends_in_143(workers: list[Worker]) -> None:
    worker = launch(sys.executable, "-c", LAUNCHER_EXITING_1_ON_SIGTERM)
    workers.append(worker)
    worker.wait_for(lambda line: line == "RUNNING")
    worker.process.send_signal(signal.SIGTERM)
    assert worker.finish() == PREEMPTED_EXIT_CODE


def test_a_launcher_killed_by_the_forwarded_sigterm_ends_in_143(workers: list[Worker]) -> None:
    worker = launch(sys.executable, "-c", "import time; print('RUNNING', flush=True); time.sleep(600)")
    workers.append(worker)
    worker.wait_for(lambda line: line == "RUNNING")
    worker.process.send_signal(signal.SIGTERM)
    assert worker.finish() == PREEMPTED_EXIT_CODE


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("raise SystemExit(0)", 0),
        ("raise SystemExit(3)", 3),  # a real crash still counts, a non-retriable code still fails
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 137),
    ],
)
def test_without_sigterm_the_launcher_status_passes_through(
    workers: list[Worker], script: str, expected: int
) -> None:
    worker = launch(sys.executable, "-c", script)
    workers.append(worker)
    assert worker.finish() == expected


def test_a_launcher_that_exits_0_after_sigterm_still_ends_in_143(workers: list[Worker]) -> None:
    """A loop that stops because of the SIGTERM and returns 0 must not end the run as Succeeded."""
    finishing = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda s, f: sys.exit(0))
print("RUNNING", flush=True)
time.sleep(600)
"""
    worker = launch(sys.executable, "-c", finishing)
    workers.append(worker)
    worker.wait_for(lambda line: line == "RUNNING")
    worker.process.send_signal(signal.SIGTERM)
    assert worker.finish() == PREEMPTED_EXIT_CODE
