"""Running worker processes and an S3 server for the checkpoint runtime tests."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("worker.py")
WAIT_SECONDS = 120  # generous: the machine is shared and noisy


class Worker:
    """A worker subprocess whose stdout lines can be awaited."""

    def __init__(self, args: list[str], env: Mapping[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.process.stderr is not None
        self._stderr.extend(self.process.stderr)

    def wait_for(self, predicate: Any, timeout: float = WAIT_SECONDS) -> str:
        """The first stdout line satisfying ``predicate``."""
        while True:
            line = self.lines.get(timeout=timeout)
            if line is None:
                raise AssertionError(f"worker ended before the expected line; stderr:\n{self.stderr()}")
            self.seen.append(line)
            if predicate(line):
                return line

    def finish(self, timeout: float = WAIT_SECONDS) -> int:
        code = self.process.wait(timeout=timeout)
        while (line := self.lines.get(timeout=timeout)) is not None:
            self.seen.append(line)
        return code

    def stderr(self) -> str:
        return "".join(self._stderr)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.kill()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture
def s3_client(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    import boto3

    for key, value in S3_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    return boto3.client("s3", endpoint_url=s3_endpoint)
