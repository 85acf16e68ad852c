"""Section 3: how late the provider's create sees Ready.

A watcher lists the clusters every few milliseconds and notes when each first shows ``Ready``; the
provider's ``create`` (tests/bench/ready_probe.py, in its own process) notes when it returned. The lag
is the difference. The watcher sees Ready at most one list round trip late, so the lag is, if anything,
understated by that much (its median round trip is in the note). The goal follows from the polling
schedule: at most max(2 s, 10% of the provisioning time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from .context import Context
from .figures import Figure, Goal, median
from .servers import API_KEY, ROOT, api_client, shipped_emulator

SECTION = "3. Ready detection lag"
PROVISIONING_EMULATED_S = 600.0  # emulator/lifecycle.py: CLUSTER_PHASE_READY 600 s after creation
CLUSTERS_PER_SPEED = 4
WATCH_INTERVAL_S = 0.02


class ReadyWatcher:
    """Polls the cluster list and remembers when each cluster name was first seen Ready."""

    def __init__(self, base_url: str) -> None:
        self.ready_at: dict[str, float] = {}
        self.round_trips: list[float] = []
        self._client = api_client(base_url)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            sent = time.monotonic()
            reply = self._client.get("/v1/compute/clusters")
            seen = time.monotonic()
            self.round_trips.append(seen - sent)
            for cluster in reply.json().get("clusters", []):
                if cluster.get("status") == "Ready":
                    self.ready_at.setdefault(cluster["cluster_name"], seen)
            self._stop.wait(WATCH_INTERVAL_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._client.close()


def measure(ctx: Context, speed: float) -> Figure:
    provisioning_s = PROVISIONING_EMULATED_S / speed
    goal_s = max(2.0, 0.1 * provisioning_s)
    names = [f"lag-{speed:g}-{i}" for i in range(CLUSTERS_PER_SPEED)]
    with shipped_emulator(speed) as emulator:
        watcher = ReadyWatcher(emulator.url)
        try:
            env = {**os.environ, "PYTHONPATH": str(ROOT), "TOGETHER_BASE_URL": emulator.url}
            env["TOGETHER_API_KEY"] = API_KEY
            probe = subprocess.run(
                [sys.executable, "-m", "tests.bench.ready_probe", *names],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=600 + 3 * provisioning_s,
                check=True,
            )
        finally:
            watcher.stop()
    returned = json.loads(probe.stdout.strip().splitlines()[-1])
    lags = [returned[name]["returned"] - watcher.ready_at[name] for name in names if name in watcher.ready_at]
    if len(lags) != len(names):
        raise RuntimeError(
            f"the watcher never saw some clusters Ready: {sorted(set(names) - set(watcher.ready_at))}"
        )
    ctx.progress(f"  speed {speed:g}: lags {', '.join(f'{lag:.2f}' for lag in lags)} s")
    return Figure(
        SECTION,
        f"create returns after Ready, provisioning {provisioning_s:g} s (speed {speed:g})",
        median(lags),
        "s",
        "0 s (Ready seen the moment it happens)",
        Goal("<=", goal_s, "s"),
        note=f"{len(lags)} concurrent creates, worst {max(lags):.2f} s; the watcher's list round trip "
        f"{median(watcher.round_trips) * 1000:.0f} ms",
        samples={"lag_s": lags},
    )


def run(ctx: Context) -> list[Figure]:
    return [measure(ctx, speed) for speed in ctx.scale.ready_speeds]
