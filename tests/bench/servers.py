"""Servers the benchmarks run against, each in a process of its own (so its GIL is not the client's)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "bench-api-key"


class Served:
    """``python -m MODULE ARGS`` whose first line of output is its base URL; stopped on exit."""

    def __init__(self, module: str, args: Sequence[str], start_timeout_s: float = 60.0) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        # The server's log goes to a file, and its output is read to the end: a pipe nobody reads fills
        # up (moto logs every request) and then blocks the server mid-request.
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        assert self.process.stdout is not None
        stdout = self.process.stdout
        threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
        try:
            self.url = lines.get(timeout=start_timeout_s).strip()
        except queue.Empty:
            self.stop()
            raise RuntimeError(f"python -m {module} printed no URL in {start_timeout_s:g}s") from None
        if not self.url.startswith("http"):
            self.stop()
            self.log.seek(0)
            raise RuntimeError(f"python -m {module} did not start: {self.log.read()[-2000:]}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def __enter__(self) -> Served:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def counting_emulator(speed: float) -> Served:
    """The emulator behind the request-recording middleware (tests/bench/counting_emulator.py)."""
    return Served("tests.bench.counting_emulator", ["--speed", f"{speed:g}"])


def shipped_emulator(speed: float, state: Path | None = None) -> Served:
    """The emulator exactly as users start it (``python -m together_clusters.emulator``)."""
    args = ["--port", "0", "--speed", f"{speed:g}"]
    if state is not None:
        args += ["--state", str(state)]
    return Served("together_clusters.emulator", args)


def twin_emulator(speed: float, *flags: str) -> Served:
    """The emulator with the Kubernetes twin, as users start it (``--kubernetes``), and ``flags``."""
    return Served(
        "together_clusters.emulator", ["--port", "0", "--speed", f"{speed:g}", "--kubernetes", *flags], 180.0
    )


def recorded_requests(emulator: Served, clear: bool = True) -> list[dict[str, Any]]:
    """What the counting emulator answered since the last clear (and clear it)."""
    method = "DELETE" if clear else "GET"
    reply = httpx.request(method, f"{emulator.url}/_bench/requests", timeout=30)
    reply.raise_for_status()
    return list(reply.json()["requests"])


def api_client(base_url: str, **options: Any) -> httpx.Client:
    """An httpx client of the compute API with the benchmark's key."""
    headers = {"Authorization": f"Bearer {API_KEY}"}
    return httpx.Client(base_url=base_url, headers=headers, timeout=60, **options)


def create_request(name: str, num_preemptible_gpus: int = 0) -> dict[str, Any]:
    """A valid create body (the region catalog of the emulator offers this region and GPU type)."""
    return {
        "cluster_name": name,
        "region": "us-central-8",
        "gpu_type": "H100_SXM",
        "num_gpus": 8,
        "num_preemptible_gpus": num_preemptible_gpus,
        "billing_type": "ON_DEMAND",
        "cluster_type": "KUBERNETES",
        "nvidia_version_id": "nv-570-cu128-ubuntu2204",  # one the region offers (the API requires a driver)
    }
