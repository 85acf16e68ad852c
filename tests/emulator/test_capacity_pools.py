"""Capacity pools: a create or update drawing past its pool, or on a pool it cannot use, is refused (400).

The pools are defined through the admin API (``PUT /_emulator/capacity-pools``); what a pool has drawn is
the sum of ``num_capacity_pool_gpus`` over the live clusters created with its ``capacity_pool_id``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import together

from together_clusters.emulator.clock import EmulatedClock
from together_clusters.emulator.shapes import ClusterCreateRequest
from together_clusters.emulator.state import Platform
from together_clusters.emulator.store import Store

from .conftest import DRIVER, GPU, REGION, create_body

CLUSTERS = "/v1/compute/clusters"


def _pooled(name: str, num_gpus: int, drawn: int, pool_id: str = "cp-1", **more: Any) -> dict[str, Any]:
    return create_body(
        cluster_name=name, num_gpus=num_gpus, capacity_pool_id=pool_id, num_capacity_pool_gpus=drawn, **more
    )


def _refusal(reply: httpx.Response, param: str) -> str:
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    return str(error["message"])


def test_a_pool_is_defined_and_listed_with_what_it_has_free(admin: Any) -> None:
    pool = admin.set_capacity_pool("cp-1", REGION, GPU, 32)
    assert pool == {
        "pool_id": "cp-1", "region": REGION, "gpu_type": GPU, "size_gpus": 32, "drawn_gpus": 0, "free_gpus": 32,
    }  # fmt: skip
    assert admin.capacity_pools() == [pool]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"pool_id": "cp-x", "region": REGION, "gpu_type": GPU, "size_gpus": 12}, "size_gpus"),
        ({"pool_id": "cp-x", "region": REGION, "gpu_type": GPU, "size_gpus": -8}, "size_gpus"),
        ({"pool_id": "cp-x", "region": "mars-1", "gpu_type": GPU, "size_gpus": 8}, "region"),
        ({"pool_id": " ", "region": REGION, "gpu_type": GPU, "size_gpus": 8}, "pool_id"),
    ],
)
def test_a_bad_pool_definition_is_refused(emu: Any, body: dict[str, Any], field: str) -> None:
    reply = httpx.put(f"{emu.base_url}/_emulator/capacity-pools", json=body)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == field, reply.text


def test_a_draw_past_the_pool_is_refused_naming_pool_size_drawn_and_free(http: Any, admin: Any) -> None:
    admin.set_capacity_pool("cp-1", REGION, GPU, 24)
    client = http()
    first = client.post(CLUSTERS, json=_pooled("a", 16, 16))
    assert first.status_code == 200, first.text
    assert first.json()["capacity_pool_id"] == "cp-1" and first.json()["num_capacity_pool_gpus"] == 16
    message = _refusal(client.post(CLUSTERS, json=_pooled("b", 16, 16)), "num_capacity_pool_gpus")
    assert message == (
        "num_capacity_pool_gpus 16 exceeds what capacity pool 'cp-1' has free: it has 24 GPUs, "
        "16 drawn by other clusters, 8 free"
    )
    assert [c["cluster_name"] for c in admin.clusters()] == ["a"]
    # What fits still goes, and the rest of a cluster beyond the pool is plain on-demand capacity.
    fits = client.post(CLUSTERS, json=_pooled("c", 16, 8))
    assert fits.status_code == 200, fits.text
    assert admin.capacity_pools()[0] == {
        "pool_id": "cp-1", "region": REGION, "gpu_type": GPU, "size_gpus": 24, "drawn_gpus": 24, "free_gpus": 0,
    }  # fmt: skip


def test_a_pool_it_cannot_use_is_refused(http: Any, admin: Any) -> None:
    admin.set_capacity_pool("cp-east", "us-east-2", GPU, 64)
    admin.set_capacity_pool("cp-h200", REGION, "H200_SXM", 64)
    client = http()
    unknown = _refusal(client.post(CLUSTERS, json=_pooled("a", 8, 8, pool_id="cp-nope")), "capacity_pool_id")
    assert "'cp-nope'" in unknown and "cp-east" in unknown  # the pools there are, to pick from
    region = _refusal(client.post(CLUSTERS, json=_pooled("b", 8, 8, pool_id="cp-east")), "capacity_pool_id")
    assert "us-east-2" in region and REGION in region
    gpu = _refusal(client.post(CLUSTERS, json=_pooled("c", 8, 8, pool_id="cp-h200")), "capacity_pool_id")
    assert "H200_SXM" in gpu and GPU in gpu
    # Naming a pool without drawing from it still needs the pool to exist.
    named = client.post(CLUSTERS, json=create_body(cluster_name="d", capacity_pool_id="cp-nope"))
    assert _refusal(named, "capacity_pool_id")
    assert admin.clusters() == []


def test_an_update_past_the_pool_is_refused_and_lowering_or_deleting_frees(http: Any, admin: Any) -> None:
    admin.set_capacity_pool("cp-1", REGION, GPU, 32)
    client = http()
    a = client.post(CLUSTERS, json=_pooled("a", 24, 16)).json()
    b = client.post(CLUSTERS, json=_pooled("b", 16, 16)).json()
    raised = client.put(f"{CLUSTERS}/{a['cluster_id']}", json={"num_capacity_pool_gpus": 24})
    assert "16 drawn by other clusters, 16 free" in _refusal(raised, "num_capacity_pool_gpus")
    assert client.get(f"{CLUSTERS}/{a['cluster_id']}").json()["num_capacity_pool_gpus"] == 16
    # Lowering b's draw (num_gpus 8 takes its share down with it) frees 8 for a.
    lowered = client.put(f"{CLUSTERS}/{b['cluster_id']}", json={"num_gpus": 8})
    assert lowered.status_code == 200 and lowered.json()["num_capacity_pool_gpus"] == 8
    grown = client.put(f"{CLUSTERS}/{a['cluster_id']}", json={"num_capacity_pool_gpus": 24})
    assert grown.status_code == 200, grown.text
    assert admin.capacity_pools()[0]["free_gpus"] == 0
    # Deleting a cluster frees its draw at once, while it still shows as Deleting.
    assert client.delete(f"{CLUSTERS}/{a['cluster_id']}").status_code == 200
    assert admin.capacity_pools()[0]["drawn_gpus"] == 8
    again = client.post(CLUSTERS, json=_pooled("c", 24, 24))
    assert again.status_code == 200, again.text
    # An update that leaves the draw alone, or omits it, is never refused for the pool.
    assert (
        client.put(f"{CLUSTERS}/{again.json()['cluster_id']}", json={"num_preemptible_gpus": 8}).status_code
        == 200
    )


def test_an_update_keeping_a_draw_past_a_shrunk_pool_is_accepted(http: Any, admin: Any) -> None:
    admin.set_capacity_pool("cp-1", REGION, GPU, 16)
    client = http()
    cluster = client.post(CLUSTERS, json=_pooled("a", 16, 16)).json()
    admin.set_capacity_pool("cp-1", REGION, GPU, 8)  # the pool shrank under the cluster
    assert admin.capacity_pools()[0]["free_gpus"] == 0
    same = client.put(f"{CLUSTERS}/{cluster['cluster_id']}", json={"num_capacity_pool_gpus": 16})
    assert same.status_code == 200, same.text
    lower = client.put(f"{CLUSTERS}/{cluster['cluster_id']}", json={"num_capacity_pool_gpus": 8})
    assert lower.status_code == 200 and lower.json()["num_capacity_pool_gpus"] == 8


def test_the_sdk_sees_a_bad_request(sdk: Any, admin: Any) -> None:
    admin.set_capacity_pool("cp-1", REGION, GPU, 8)
    with pytest.raises(together.BadRequestError) as err:
        sdk().clusters.create(**_pooled("a", 16, 16))
    assert "capacity pool 'cp-1'" in str(err.value)


def test_reset_forgets_the_pools(admin: Any) -> None:
    admin.set_capacity_pool("cp-1", REGION, GPU, 8)
    admin.reset()
    assert admin.capacity_pools() == []


def test_pools_and_draws_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    platform = Platform(clock=EmulatedClock(speed=0), store=Store(path))
    platform.set_capacity_pool("cp-1", REGION, GPU, 16)
    request = ClusterCreateRequest.model_validate(_pooled("a", 16, 8) | {"nvidia_version_id": DRIVER})
    platform.create_cluster("owner", "project", request)
    platform.flush()
    restarted = Platform(store=Store(path), speed=0)
    assert restarted.capacity_pools() == [
        {
            "pool_id": "cp-1",
            "region": REGION,
            "gpu_type": GPU,
            "size_gpus": 16,
            "drawn_gpus": 8,
            "free_gpus": 8,
        }
    ]
