"""Outputs from a live cluster as the API reports it, with and without the per-node class marking."""

from __future__ import annotations

from datetime import UTC, datetime

from together_clusters.provider.mapping import live_outputs, read_inputs
from together_clusters.provider.models import Cluster

NOW = datetime(2026, 11, 30, tzinfo=UTC).isoformat()


def node(node_id: str, **extra) -> dict:
    return {
        "host_name": node_id,
        "memory_gib": 1024.0,
        "networks": [],
        "node_id": node_id,
        "num_cpu_cores": 96,
        "num_gpus": 8,
        "phase_transitions": [{"phase": "NODE_PHASE_RUNNING", "transition_time": NOW}],
        "status": "Ready",
        **extra,
    }


def cluster(
    nodes: list[dict], allocated: int, desired: int = 16, events: list[dict] | None = None
) -> Cluster:
    return Cluster.model_validate(
        {
            "add_ons": [],
            "allocated_preemptible_gpus": allocated,
            "billing_type": "ON_DEMAND",
            "cluster_id": "c-1",
            "cluster_name": "demo",
            "cluster_type": "KUBERNETES",
            "control_plane_nodes": [],
            "cuda_version": "12.4",
            "desired_preemptible_gpus": desired,
            "gpu_type": "H100_SXM",
            "gpu_worker_nodes": nodes,
            "kube_config": "apiVersion: v1",
            "num_capacity_pool_gpus": 0,
            "num_cpu_workers": 0,
            "num_gpus": 16,
            "num_reserved_gpus": 0,
            "nvidia_driver_version": "550",
            "phase_transitions": [{"phase": "CLUSTER_PHASE_READY", "transition_time": NOW}],
            "project_id": "proj-1",
            "region": "us-central-8",
            "status": "Ready",
            "volumes": [],
            "node_lifecycle_events": events or [],
            "a_field_added_later": {"tolerated": True},
        }
    )


def test_marked_nodes_are_counted_by_their_class():
    nodes = [node("s1", compute_class="standard"), node("p1", compute_class="preemptible")]
    outs = live_outputs(cluster(nodes, allocated=8))
    assert (outs["standard_nodes"], outs["preemptible_nodes"]) == (1, 1)
    assert outs["preemptible_shortfall_gpus"] == 8


def test_unmarked_nodes_fall_back_to_the_allocated_count():
    nodes = [node("s1"), node("s2"), node("p1")]
    outs = live_outputs(cluster(nodes, allocated=8))
    assert (outs["standard_nodes"], outs["preemptible_nodes"]) == (2, 1)
    # An allocation the node list does not (yet) show never counts more nodes than there are.
    outs = live_outputs(cluster([node("s1")], allocated=16))
    assert (outs["standard_nodes"], outs["preemptible_nodes"]) == (0, 1)
    assert live_outputs(cluster(nodes, allocated=0))["preemptible_nodes"] == 0


def test_preemptions_are_counted_with_the_last_time():
    events = [
        {"message": "m", "node_id": "p1", "reason": "TogetherPreempted", "timestamp": "2026-11-30T01:00:00Z"},
        {"message": "m", "node_id": "p2", "reason": "TogetherScaledUp", "timestamp": "2026-11-30T02:00:00Z"},
        {"message": "m", "node_id": "p2", "reason": "TogetherPreempted", "timestamp": "2026-11-30T03:00:00Z"},
    ]
    outs = live_outputs(cluster([], allocated=0, events=events))
    assert outs["recent_preemptions"] == 2
    assert outs["last_preempted_at"] == "2026-11-30T03:00:00Z"


def test_read_back_takes_server_desired_values_but_not_server_defaults():
    live = cluster([], allocated=0, desired=24)
    code = {"cluster_name": "demo", "region": "us-central-8", "gpu_type": "H100_SXM", "num_gpus": 16}
    inputs = read_inputs(live, code | {"num_preemptible_gpus": 8, "ready_timeout_minutes": 5})
    assert inputs["num_preemptible_gpus"] == 24
    assert inputs["ready_timeout_minutes"] == 5
    # Left unset in code, so whatever the server chose is not read back as an input.
    assert "project_id" not in inputs and "cuda_version" not in inputs


def test_standard_nodes_use_the_same_classes_as_the_counts():
    """An update waits on these: guessed preemptible nodes and nodes on their way out are not standard."""
    from together_clusters.provider.mapping import standard_nodes

    nodes = [node("s1"), node("s2", marked_for_deletion=True), node("p1")]
    assert [n.node_id for n in standard_nodes(cluster(nodes, allocated=8))] == ["s1"]
    marked = [node("p1", compute_class="preemptible"), node("s1", compute_class="standard")]
    assert [n.node_id for n in standard_nodes(cluster(marked, allocated=0))] == ["s1"]


def test_both_names_of_a_preemption_count_once_per_node():
    """The SDK names it TogetherPreempted, the platform's docs TogetherPreemptionNotified: either counts, and a
    node announced under both names is one preemption."""
    events = [
        {
            "message": "m",
            "node_id": "p1",
            "reason": "TogetherPreemptionNotified",
            "timestamp": "2026-11-30T01:00:00Z",
        },
        {"message": "m", "node_id": "p1", "reason": "TogetherPreempted", "timestamp": "2026-11-30T01:00:01Z"},
        {
            "message": "m",
            "node_id": "p2",
            "reason": "TogetherPreemptionNotified",
            "timestamp": "2026-11-30T03:00:00Z",
        },
        {"message": "m", "node_id": "p3", "reason": "TogetherNodeAdded", "timestamp": "2026-11-30T04:00:00Z"},
    ]
    outs = live_outputs(cluster([], allocated=0, events=events))
    assert outs["recent_preemptions"] == 2
    assert outs["last_preempted_at"] == "2026-11-30T03:00:00Z"


def test_a_documented_node_name_tells_its_class():
    """gpu-dp... is standard, gpu-preemptible-dp... preemptible, whatever the newest nodes are."""
    nodes = [node("gpu-preemptible-dp-a1-1"), node("gpu-dp-a1-2")]
    outs = live_outputs(cluster(nodes, allocated=8))
    assert (outs["standard_nodes"], outs["preemptible_nodes"]) == (1, 1)
    from together_clusters.provider.mapping import standard_nodes

    assert [n.node_id for n in standard_nodes(cluster(nodes, allocated=8))] == ["gpu-dp-a1-2"]
