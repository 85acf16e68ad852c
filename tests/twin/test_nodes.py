"""Which Nodes a cluster's twin should have, from the platform's records (pure: no control plane needed)."""

from __future__ import annotations

import argparse

import pytest

from together_clusters.emulator.kubernetes import binaries
from together_clusters.emulator.kubernetes.nodes import NodeOptions, cluster_view, node_manifest, node_name
from together_clusters.emulator.kubernetes.options import add_kubernetes_args, twin_options
from together_clusters.emulator.lifecycle import node_schedule
from together_clusters.emulator.records import ClusterRecord, EventRecord, NodeRecord, Timed

T0 = 1_800_000_000.0


def record(*nodes: NodeRecord, events: list[EventRecord] | None = None) -> ClusterRecord:
    return ClusterRecord(
        cluster_id="c-1",
        seq=1,
        owner="o",
        project_id="p",
        cluster_name="Train_Run",
        region="us-central-8",
        gpu_type="H100_SXM",
        billing_type="ON_DEMAND",
        cluster_type="KUBERNETES",
        num_gpus=8,
        desired_preemptible_gpus=8,
        num_reserved_gpus=0,
        num_capacity_pool_gpus=0,
        driver={},
        created_at=T0,
        kube_token="token",
        schedule=[Timed(phase="CLUSTER_PHASE_QUEUED", at=T0)],
        control_plane=None,
        nodes=list(nodes),
        events=events or [],
    )


def node(node_id: str, compute_class: str, appears_at: float = T0) -> NodeRecord:
    return NodeRecord(
        node_id=node_id,
        instance_id=f"i-{node_id}",
        compute_class=compute_class,  # type: ignore[arg-type]
        schedule=node_schedule(appears_at),
    )


def test_a_node_joins_kubernetes_once_booted_and_names_are_valid() -> None:
    cluster = record(node("Train_Run-standard-1", "standard"), node("Train_Run-preemptible-2", "preemptible"))
    assert cluster_view(cluster, T0 + 119).nodes == ()
    booted = cluster_view(cluster, T0 + 120).nodes
    assert [(n.name, n.compute_class, n.gpu_type) for n in booted] == [
        ("train-run-standard-1", "standard", "H100_SXM"),
        ("train-run-preemptible-2", "preemptible", "H100_SXM"),
    ]
    assert node_name("A..b__C") == "a..b-c"


def test_a_preempted_node_carries_its_announcement_and_grace_period() -> None:
    reclaimed = node("n-preemptible-2", "preemptible")
    reclaimed.cordoned_at, reclaimed.remove_at = T0 + 200, T0 + 205
    message = "Node n-preemptible-2 is being preempted: cordoned, pods have 300s to terminate"
    event = EventRecord(node_id=reclaimed.node_id, reason="TogetherPreempted", message=message, at=T0 + 200)
    [view] = cluster_view(record(reclaimed, events=[event]), T0 + 201).nodes
    assert view.preemption is not None
    assert (view.preemption.at, view.preemption.grace_seconds, view.preemption.message) == (
        T0 + 200,
        5,
        message,
    )


def test_the_preemptible_taint_is_an_option() -> None:
    [preemptible] = cluster_view(record(node("n-preemptible-1", "preemptible")), T0 + 120).nodes
    tainted = node_manifest(preemptible, NodeOptions())
    assert tainted["spec"]["taints"] == [
        {"key": "together.ai/compute-class", "value": "preemptible", "effect": "NoSchedule"}
    ]
    assert "taints" not in node_manifest(preemptible, NodeOptions(preemptible_taint=False))["spec"]
    assert tainted["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert tainted["metadata"]["labels"]["together.ai/compute-class"] == "preemptible"


def test_the_preemption_event_is_named_as_documented_unless_asked_for_the_sdks_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(binaries, "require", lambda **_: None)
    parser = argparse.ArgumentParser()
    add_kubernetes_args(parser)
    default = twin_options(parser.parse_args(["--kubernetes"]))
    assert default is not None and default.preemption_reason == "TogetherPreemptionNotified"
    sdk = twin_options(parser.parse_args(["--kubernetes", "--preemption-reason", "TogetherPreempted"]))
    assert sdk is not None and sdk.preemption_reason == "TogetherPreempted"
    with pytest.raises(SystemExit):
        parser.parse_args(["--kubernetes", "--preemption-reason", "TogetherScaledUp"])
