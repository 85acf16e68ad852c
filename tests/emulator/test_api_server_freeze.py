"""The twin's "API server stops answering" fault (ControlPlane.set_answering): it says whether the freeze took
effect, and returns only once every thread of the process is stopped, so a client's next call meets a frozen
server, never one still answering; a server that is not running is not reported frozen."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from together_clusters.emulator.kubernetes.controlplane import ControlPlane

# A process with several busy threads, as kube-apiserver's Go runtime has.
_THREADS = """
import threading, time
def spin():
    while True:
        sum(range(1000))
for _ in range(6):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
time.sleep(600)
"""


def thread_states(pid: int) -> list[str]:
    return [
        (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        for task in Path(f"/proc/{pid}/task").iterdir()
    ]


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[tuple[ControlPlane, subprocess.Popen[bytes]]]:
    process = subprocess.Popen([sys.executable, "-c", _THREADS], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    control_plane = ControlPlane(None, tmp_path, "c", "token")  # type: ignore[arg-type]  # no binary is run
    control_plane._processes["kube-apiserver"] = process
    try:
        yield control_plane, process
    finally:
        process.kill()
        process.wait()


def test_a_frozen_api_server_has_every_thread_stopped_when_the_call_returns(
    plane: tuple[ControlPlane, subprocess.Popen[bytes]],
) -> None:
    control_plane, process = plane
    for _ in range(20):
        assert control_plane.set_answering(False) is True
        assert set(thread_states(process.pid)) <= {"T", "t"}, thread_states(process.pid)
        assert control_plane.set_answering(True) is True
        assert not set(thread_states(process.pid)) & {"T", "t"}, thread_states(process.pid)


def test_an_api_server_that_is_not_running_is_not_reported_frozen(
    plane: tuple[ControlPlane, subprocess.Popen[bytes]],
) -> None:
    control_plane, process = plane
    process.kill()
    process.wait()
    assert control_plane.set_answering(False) is False
    del control_plane._processes["kube-apiserver"]
    assert control_plane.set_answering(False) is False
