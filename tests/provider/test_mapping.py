"""Outputs from a live cluster as the API reports it, with and without the per-node class marking."""

from __future__ import annotations

import base64
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
    nodes: list[dict],
    allocated: int,
    desired: int = 16,
    events: list[dict] | None = None,
    kube_config: str | None = "apiVersion: v1",
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
            "kube_config": kube_config,
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


def test_a_read_by_id_alone_takes_every_field_the_server_reports_set():
    """What ``pulumi import`` needs: the inputs under their names, those that replace included; a zero the
    server reports for a field nobody set (``num_reserved_gpus`` of an on-demand cluster) is left unset."""
    inputs = read_inputs(cluster([], allocated=0, desired=8), {}, everything=True)
    assert inputs == {
        "cluster_name": "demo",
        "region": "us-central-8",
        "gpu_type": "H100_SXM",
        "num_gpus": 16,
        "num_preemptible_gpus": 8,
        "billing_type": "ON_DEMAND",
        "cluster_type": "KUBERNETES",
        "project_id": "proj-1",
        "cuda_version": "12.4",
        "nvidia_driver_version": "550",
    }


def test_standard_nodes_use_the_same_classes_as_the_counts():
    """An update waits on these: guessed preemptible nodes and nodes on their way out are not standard."""
    from together_clusters.provider.mapping import standard_nodes

    nodes = [node("s1"), node("s2", marked_for_deletion=True), node("p1")]
    assert [n.node_id for n in standard_nodes(cluster(nodes, allocated=8))] == ["s1"]
    marked = [node("p1", compute_class="preemptible"), node("s1", compute_class="standard")]
    assert [n.node_id for n in standard_nodes(cluster(marked, allocated=0))] == ["s1"]


KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n"


def test_the_kube_config_output_is_the_decoded_kubeconfig():
    """The API sends ``kube_config`` base64-encoded (as tg decodes it); the output is the text to load."""
    wire = base64.b64encode(KUBECONFIG.encode()).decode()
    assert live_outputs(cluster([], 0, kube_config=wire))["kube_config"] == KUBECONFIG


def test_a_plain_yaml_kube_config_is_taken_as_it_is():
    assert live_outputs(cluster([], 0, kube_config=KUBECONFIG))["kube_config"] == KUBECONFIG
    assert live_outputs(cluster([], 0, kube_config=None))["kube_config"] is None
    assert live_outputs(cluster([], 0, kube_config=""))["kube_config"] == ""


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


def test_an_autoscaling_clusters_own_growth_is_never_read_back_as_drift():
    from together_clusters.provider.mapping import floor_as_code_sees_it

    code = {"num_gpus": 16, "auto_scale": True, "auto_scale_max_gpus": 48}
    # An API that reports the live size: 32 of up to 48 is the platform at work, the floor stands.
    live = cluster([], allocated=0).model_copy(update={"num_gpus": 32})
    assert read_inputs(live, code)["num_gpus"] == 16
    assert floor_as_code_sees_it(48, code) == 16
    # Past the ceiling, or below the floor, is a change made outside Pulumi: it shows.
    assert floor_as_code_sees_it(56, code) == 56 and floor_as_code_sees_it(8, code) == 8
    # Without autoscaling, any other count is drift, as before.
    assert read_inputs(live, {"num_gpus": 16})["num_gpus"] == 32


def test_a_new_floor_never_undoes_the_platforms_scaling():
    from together_clusters.provider.mapping import num_gpus_to_send

    # An API reporting the floor: the new floor is sent, up or down.
    assert num_gpus_to_send(24, 16, 16, 64) == 24 and num_gpus_to_send(8, 16, 16, 64) == 8
    # An API reporting the live size (40, grown from 16): a lower floor must not shrink it under the work.
    assert num_gpus_to_send(24, 16, 40, 64) == 40 and num_gpus_to_send(48, 16, 40, 64) == 48
    # No autoscaling: the code's count.
    assert num_gpus_to_send(8, 16, 40, None) == 8


def test_new_api_fields_are_read_back_when_the_code_sets_them():
    live = cluster([], allocated=0).model_copy(
        update={"capacity_pool_id": "cp-1", "num_capacity_pool_gpus": 8, "install_traefik": True}
    )
    code = {"num_gpus": 16, "capacity_pool_id": "cp-1", "num_capacity_pool_gpus": 0}
    assert read_inputs(live, code)["num_capacity_pool_gpus"] == 8  # changed outside Pulumi
    assert "install_traefik" not in read_inputs(live, {"num_gpus": 16})  # left to the server
