"""``python -m together_clusters.emulator`` as a user runs it: a real process, on a free port."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def emulator_process(*args: str, stop_timeout: float = 10.0) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The emulator started with ``args`` (after ``--port 0``): its base URL, once it prints it, and the process.

    On the way out it is stopped as Ctrl-C stops it (SIGINT) and must exit 0, unless the test ended it
    itself; killed if it is not gone within ``stop_timeout`` seconds.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "together_clusters.emulator", "--port", "0", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else base_url
        yield base_url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
