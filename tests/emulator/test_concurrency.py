"""Parallel requests: every create lands once, and the preemptible pool stays consistent."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from .conftest import GPU, REGION, create_body


def test_parallel_creates(emu: Any, admin: Any) -> None:
    admin.set_capacity(REGION, GPU, 80)

    def create(i: int) -> str:
        with httpx.Client(base_url=emu.base_url, headers={"Authorization": f"Bearer key-{i % 3}"}) as client:
            reply = client.post(
                "/v1/compute/clusters", json=create_body(cluster_name=f"par-{i}", num_preemptible_gpus=8)
            )
            assert reply.status_code == 200, reply.text
            return str(reply.json()["cluster_id"])

    with ThreadPoolExecutor(max_workers=20) as pool:
        ids = list(pool.map(create, range(20)))
    assert len(set(ids)) == 20
    assert sorted(c["cluster_name"] for c in admin.clusters()) == sorted(f"par-{i}" for i in range(20))

    admin.advance(30)
    clusters = admin.clusters()
    allocated = sum(c["allocated_preemptible_gpus"] for c in clusters)
    pool_state = admin.pool(REGION, GPU)
    assert allocated == 80 and pool_state["allocated_preemptible_gpus"] == 80
    assert pool_state["preemptible_gpus"] == 0
    assert sorted(c["allocated_preemptible_gpus"] for c in clusters) == [0] * 10 + [8] * 10


def test_parallel_duplicate_names_create_one(emu: Any, admin: Any) -> None:
    def create(_: int) -> int:
        with httpx.Client(base_url=emu.base_url, headers={"Authorization": "Bearer same-key"}) as client:
            return client.post("/v1/compute/clusters", json=create_body(cluster_name="only-one")).status_code

    with ThreadPoolExecutor(max_workers=10) as pool:
        statuses = sorted(pool.map(create, range(10)))
    assert statuses == [200] + [409] * 9
    assert len(admin.clusters()) == 1
