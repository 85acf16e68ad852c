"""One time line: the emulator's timestamps are wall-clock times; its speed shortens durations instead.

At speed 600 a bring-up of ten platform minutes takes one second, and the API says so: created at the moment
of the request, Ready one second later. A clock running at 600 x would put these timestamps hours ahead of
the wall clock (and of what Kubernetes stamps in the twin) after a few seconds.
"""

from __future__ import annotations

import time
from datetime import datetime

import httpx
import pytest

from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.server import start_emulator

from .conftest import create_body

SPEED = 600


def epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def test_api_timestamps_are_wall_clock_times_and_speed_shortens_durations() -> None:
    with (
        start_emulator(speed=SPEED) as emulator,
        httpx.Client(
            base_url=emulator.base_url, headers={"Authorization": "Bearer key-timeline"}, timeout=30
        ) as http,
    ):
        admin = AdminClient(emulator.base_url)
        time.sleep(1.0)  # let a clock that ran at 600 x get ten minutes ahead
        before = time.time()
        cluster = http.post("/v1/compute/clusters", json=create_body(num_preemptible_gpus=8)).json()
        after = time.time()
        assert before <= epoch(cluster["created_at"]) <= after
        deadline = time.monotonic() + 60
        while cluster["status"] != "Ready" and time.monotonic() < deadline:
            time.sleep(0.1)
            cluster = http.get(f"/v1/compute/clusters/{cluster['cluster_id']}").json()
        read_at = time.time()
        assert cluster["status"] == "Ready"
        created = epoch(cluster["created_at"])
        # READY is ten platform minutes after creation: one second at speed 600.
        assert epoch(cluster["first_ready_at"]) - created == pytest.approx(600 / SPEED, abs=1e-3)
        assert all(epoch(t["transition_time"]) <= read_at for t in cluster["phase_transitions"])

        preempted = admin.preempt(cluster["cluster_id"])
        assert before <= epoch(preempted["preempted_at"]) <= time.time()
        # The 300 s grace period lasts half a second at speed 600.
        assert epoch(preempted["delete_at"]) - epoch(preempted["preempted_at"]) == pytest.approx(
            0.5, abs=1e-3
        )
        clock = admin.clock()
        assert abs(clock["now_s"] - time.time()) < 5
        admin.close()
