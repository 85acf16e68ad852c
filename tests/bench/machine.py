"""The machine a run measured: enough to tell whether two runs are comparable."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .servers import ROOT


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0


def _command(*args: str) -> str:
    try:
        proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return "unknown"
    return proc.stdout.strip().splitlines()[0] if proc.returncode == 0 and proc.stdout.strip() else "unknown"


def describe() -> dict[str, Any]:
    """CPU, memory, OS, Python, engine version, the commit measured, and the load when it started."""
    engine = ROOT / ".engine" / "bin" / "pulumi"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "cpu": _cpu_model(),
        "cpus": len(os.sched_getaffinity(0)),
        "memory_gib": round(_memory_gib(), 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "pulumi": _command(str(engine), "version") if engine.exists() else "not installed",
        "commit": _command("git", "rev-parse", "--short", "HEAD"),
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
