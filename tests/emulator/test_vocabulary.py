"""The emulator speaks the platform's documented vocabulary: node names that encode the class, and
node_lifecycle_events kept 72 hours, one per node and reason."""

from __future__ import annotations

from typing import Any

from together_clusters.emulator import render
from together_clusters.emulator.records import EventRecord
from together_clusters.platform import ComputeClass, compute_class_of_node

from .conftest import GPU, REGION, create_body

HOUR = 3600.0


def test_nodes_are_named_gpu_dp_and_gpu_preemptible_dp_unique_across_clusters(sdk: Any, admin: Any) -> None:
    admin.set_capacity(REGION, GPU, 32)
    client = sdk()
    first = client.clusters.create(**create_body(cluster_name="one", num_gpus=16, num_preemptible_gpus=16))
    second = client.clusters.create(**create_body(cluster_name="two", num_preemptible_gpus=8))
    admin.advance(600)
    names: list[str] = []
    for created, standard, preemptible in ((first, 2, 2), (second, 1, 1)):
        cluster = client.clusters.retrieve(created.cluster_id)
        nodes = cluster.gpu_worker_nodes
        classes = [compute_class_of_node(n.node_id) for n in nodes]
        assert sorted(classes) == sorted(
            [ComputeClass.STANDARD] * standard + [ComputeClass.PREEMPTIBLE] * preemptible
        )
        assert all(n.host_name == n.node_id for n in nodes)
        names += [n.node_id for n in nodes]
        # The events name the same nodes.
        assert {e.node_id for e in cluster.node_lifecycle_events or []} <= set(names)
    assert len(names) == len(set(names)) == 6


def test_lifecycle_events_are_kept_72_hours(sdk: Any, admin: Any) -> None:
    admin.set_capacity(REGION, GPU, 8)
    client = sdk()
    cluster = client.clusters.create(**create_body(num_preemptible_gpus=8))
    admin.advance(600)
    [added] = client.clusters.retrieve(cluster.cluster_id).node_lifecycle_events or []
    admin.advance(72 * HOUR - 600 - 60)
    assert [e.node_id for e in client.clusters.retrieve(cluster.cluster_id).node_lifecycle_events or []] == [
        added.node_id
    ]
    admin.advance(120)
    assert client.clusters.retrieve(cluster.cluster_id).node_lifecycle_events == []


def test_lifecycle_events_are_one_per_node_and_reason_the_latest() -> None:
    events = [
        EventRecord(node_id="gpu-preemptible-dp-1", reason="TogetherScaledUp", message="first", at=10),
        EventRecord(node_id="gpu-preemptible-dp-1", reason="TogetherScaledUp", message="again", at=20),
        EventRecord(node_id="gpu-preemptible-dp-1", reason="TogetherPreempted", message="p", at=30),
        EventRecord(node_id="gpu-preemptible-dp-2", reason="TogetherScaledUp", message="other", at=15),
        EventRecord(node_id="gpu-preemptible-dp-2", reason="TogetherScaledDown", message="later", at=10_000),
    ]
    shown = render.lifecycle_events(events, now=100)
    assert [(e["node_id"], e["reason"], e["message"]) for e in shown] == [
        ("gpu-preemptible-dp-2", "TogetherScaledUp", "other"),
        ("gpu-preemptible-dp-1", "TogetherScaledUp", "again"),
        ("gpu-preemptible-dp-1", "TogetherPreempted", "p"),
    ]
