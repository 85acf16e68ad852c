"""``python -m together_clusters.emulator --state FILE`` as a real process: a restart loses nothing."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.emulator_process import emulator_process
from together_clusters.emulator.admin_client import AdminClient

from .conftest import GPU, REGION, create_body


def test_state_survives_restart(tmp_path: Path) -> None:
    state = tmp_path / "emulator.sqlite"
    headers = {"Authorization": "Bearer key-restart"}
    with emulator_process("--state", str(state), "--speed", "0") as (url, _):
        admin = AdminClient(url)
        admin.set_capacity(REGION, GPU, 8)
        admin.set_grace_seconds(42)
        with httpx.Client(base_url=url, headers=headers) as client:
            ids = [
                client.post(
                    "/v1/compute/clusters", json=create_body(cluster_name=f"c{i}", num_preemptible_gpus=16)
                ).json()["cluster_id"]
                for i in range(3)
            ]
            admin.advance(700)
            admin.preempt(ids[0])
            before = {cid: client.get(f"/v1/compute/clusters/{cid}").json() for cid in ids}
            clock_before = admin.clock()["now_s"]
        admin.close()
    assert os.path.getsize(state) > 0

    with emulator_process("--state", str(state), "--speed", "0") as (url, _):
        admin = AdminClient(url)
        assert admin.clock()["now_s"] >= clock_before
        assert {c["cluster_id"] for c in admin.clusters()} == set(ids)
        with httpx.Client(base_url=url, headers=headers) as client:
            after = {cid: client.get(f"/v1/compute/clusters/{cid}").json() for cid in ids}
            assert after == before
            # The preemption in flight carries on after the restart with the saved grace period.
            admin.advance(42)
            preempted = client.get(f"/v1/compute/clusters/{ids[0]}").json()
            assert len(preempted["deleted_gpu_worker_nodes"]) == 1
        assert admin.pool(REGION, GPU)["preemptible_gpus"] == 0
        admin.close()
