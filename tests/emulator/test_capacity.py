"""Preemptible pools: partial allocation, refill, release, and preemption with its grace period."""

from __future__ import annotations

from typing import Any

import pytest
import together

from .conftest import GPU, REGION, create_body


def _preemptible(cluster: Any) -> list[Any]:
    """The emulator names GPU nodes as documented (``gpu-dp-...``, ``gpu-preemptible-dp-...``): the SDK's shape has no class."""
    return [n for n in cluster.gpu_worker_nodes if "-preemptible-" in n.host_name]


def test_partial_allocation_then_refill(sdk: Any, admin: Any) -> None:
    admin.set_capacity(REGION, GPU, 8)
    client = sdk()
    cluster = client.clusters.create(**create_body(num_preemptible_gpus=16))
    assert (cluster.desired_preemptible_gpus, cluster.allocated_preemptible_gpus) == (16, 0)
    admin.advance(30)
    cluster = client.clusters.retrieve(cluster.cluster_id)
    assert (cluster.desired_preemptible_gpus, cluster.allocated_preemptible_gpus) == (16, 8)
    assert admin.pool(REGION, GPU)["preemptible_gpus"] == 0
    admin.advance(600)
    assert client.clusters.retrieve(cluster.cluster_id).allocated_preemptible_gpus == 8

    admin.set_capacity(REGION, GPU, 8)
    admin.advance(30)
    cluster = client.clusters.retrieve(cluster.cluster_id)
    assert cluster.allocated_preemptible_gpus == 16
    assert [e.reason for e in cluster.node_lifecycle_events or []] == ["TogetherScaledUp", "TogetherScaledUp"]
    nodes = _preemptible(cluster)
    assert len(nodes) == 2
    pool = admin.pool(REGION, GPU)
    assert (pool["preemptible_gpus"], pool["allocated_preemptible_gpus"]) == (0, 16)


def test_lowering_desired_releases_to_pool(sdk: Any, admin: Any) -> None:
    client = sdk()
    cluster = client.clusters.create(**create_body(num_preemptible_gpus=24))
    admin.advance(200)
    assert admin.pool(REGION, GPU)["preemptible_gpus"] == 64 - 24
    lowered = client.clusters.update(cluster.cluster_id, num_preemptible_gpus=8)
    assert (lowered.desired_preemptible_gpus, lowered.allocated_preemptible_gpus) == (8, 8)
    assert len(lowered.deleted_gpu_worker_nodes or []) == 2
    assert [e.reason for e in lowered.node_lifecycle_events or []][-2:] == ["TogetherScaledDown"] * 2
    assert admin.pool(REGION, GPU)["preemptible_gpus"] == 64 - 8


def test_preemption_cordons_then_deletes_after_grace_then_refills(sdk: Any, admin: Any) -> None:
    admin.set_capacity(REGION, GPU, 16)
    client = sdk()
    cluster = client.clusters.create(**create_body(num_preemptible_gpus=16))
    admin.advance(600)
    assert client.clusters.retrieve(cluster.cluster_id).allocated_preemptible_gpus == 16

    result = admin.preempt(cluster.cluster_id, count=1)
    [victim] = result["preempted"]
    cluster = client.clusters.retrieve(cluster.cluster_id)
    node = next(n for n in cluster.gpu_worker_nodes if n.node_id == victim)
    assert node.status == "Cordoned" and node.marked_for_deletion is True
    event = (cluster.node_lifecycle_events or [])[-1]
    assert (event.reason, event.node_id) == ("TogetherPreempted", victim)
    assert cluster.allocated_preemptible_gpus == 16

    admin.advance(299)
    cluster = client.clusters.retrieve(cluster.cluster_id)
    assert victim in [n.node_id for n in cluster.gpu_worker_nodes]
    admin.advance(1)
    cluster = client.clusters.retrieve(cluster.cluster_id)
    assert victim not in [n.node_id for n in cluster.gpu_worker_nodes]
    [gone] = [n for n in cluster.deleted_gpu_worker_nodes or [] if n.node_id == victim]
    assert gone.deleted_at is not None and (
        gone.deleted_at - event.timestamp
    ).total_seconds() == pytest.approx(300)
    assert (cluster.allocated_preemptible_gpus, cluster.desired_preemptible_gpus) == (8, 16)
    # The reclaimed GPUs went to someone else: the pool stays empty and nothing refills.
    admin.advance(600)
    assert client.clusters.retrieve(cluster.cluster_id).allocated_preemptible_gpus == 8
    assert admin.pool(REGION, GPU)["preemptible_gpus"] == 0

    admin.set_capacity(REGION, GPU, 8)
    admin.advance(30)
    cluster = client.clusters.retrieve(cluster.cluster_id)
    assert cluster.allocated_preemptible_gpus == 16
    assert (cluster.node_lifecycle_events or [])[-1].reason == "TogetherScaledUp"


def test_grace_is_configurable_and_preempt_errors(sdk: Any, admin: Any, http: Any) -> None:
    admin.set_grace_seconds(10)
    client = sdk()
    cluster = client.clusters.create(**create_body(num_preemptible_gpus=8))
    admin.advance(30)
    admin.preempt(cluster.cluster_id)
    admin.advance(10)
    assert client.clusters.retrieve(cluster.cluster_id).allocated_preemptible_gpus == 0
    raw = http(None)
    too_many = raw.post("/_emulator/preempt", json={"cluster_id": cluster.cluster_id, "count": 5})
    assert too_many.status_code == 409 and too_many.json()["error"]["param"] == "count"
    unknown = raw.post("/_emulator/preempt", json={"cluster_id": "nope", "count": 1})
    assert unknown.status_code == 404


def test_deleting_a_cluster_returns_its_preemptible_gpus(sdk: Any, admin: Any) -> None:
    admin.set_capacity(REGION, GPU, 8)
    client = sdk()
    first = client.clusters.create(**create_body(cluster_name="first", num_preemptible_gpus=8))
    admin.advance(30)
    second = client.clusters.create(**create_body(cluster_name="second", num_preemptible_gpus=8))
    admin.advance(30)
    assert client.clusters.retrieve(second.cluster_id).allocated_preemptible_gpus == 0
    client.clusters.delete(first.cluster_id)
    admin.advance(60 + 30)
    assert client.clusters.retrieve(second.cluster_id).allocated_preemptible_gpus == 8
    with pytest.raises(together.NotFoundError):
        client.clusters.retrieve(first.cluster_id)
    assert admin.pool(REGION, GPU)["preemptible_gpus"] == 0


def test_preempting_a_chosen_node_takes_that_node_and_refuses_one_that_cannot_be(
    sdk: Any, admin: Any, http: Any
) -> None:
    """A drill names the node it watches: the platform must take that one, not its own oldest pick."""
    admin.set_capacity(REGION, GPU, 24)
    client = sdk()
    cluster = client.clusters.create(**create_body(num_preemptible_gpus=24))
    admin.advance(600)
    oldest, chosen, _ = [n.node_id for n in _preemptible(client.clusters.retrieve(cluster.cluster_id))]

    result = admin.preempt(cluster.cluster_id, node_ids=[chosen])
    assert result["preempted"] == [chosen]
    nodes = {n.node_id: n for n in client.clusters.retrieve(cluster.cluster_id).gpu_worker_nodes}
    assert nodes[chosen].status == "Cordoned" and nodes[oldest].status != "Cordoned"

    raw = http(None)
    for node_ids, why in (([chosen], "already"), (["nope"], "not a preemptible node")):
        refused = raw.post(
            "/_emulator/preempt", json={"cluster_id": cluster.cluster_id, "node_ids": node_ids}
        )
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["param"] == "node_ids" and why in error["message"] and node_ids[0] in error["message"]
    both = raw.post(
        "/_emulator/preempt", json={"cluster_id": cluster.cluster_id, "count": 2, "node_ids": [oldest]}
    )
    assert both.status_code in (400, 422) and "node_ids" in both.text
