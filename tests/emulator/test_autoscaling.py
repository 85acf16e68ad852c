"""Autoscaling (issue 42): standard nodes added for pending GPU demand up to the ceiling after a delay, added
nodes removed once idle down to the floor, never a busy one; the decisions, the state machine, the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from together_clusters.emulator import autoscaling
from together_clusters.emulator.autoscaling import StandardNode
from together_clusters.emulator.clock import EmulatedClock
from together_clusters.emulator.kubernetes.demand import Demand, demand_of
from together_clusters.emulator.kubernetes.nodes import cluster_view
from together_clusters.emulator.shapes import ClusterCreateRequest, ClusterUpdateRequest
from together_clusters.emulator.state import Platform
from together_clusters.emulator.store import Store
from together_clusters.platform import COMPUTE_CLASS_LABEL, LifecycleReason

from .conftest import create_body
from .strict import strict_cluster

START = 1_800_000_000.0
READY_S = 650.0
UP = autoscaling.SCALE_UP_DELAY_S
IDLE = autoscaling.IDLE_WINDOW_S


def _floor(n: int) -> list[StandardNode]:
    return [StandardNode(f"std-{i}", autoscaled=False, busy=True) for i in range(n)]


# --- the decisions (pure) --------------------------------------------------------------------------


def test_pending_gpus_want_one_node_per_eight_within_the_ceiling() -> None:
    assert autoscaling.nodes_to_add(8, 32, _floor(1), pending_gpus=12) == 2
    assert autoscaling.nodes_to_add(8, 32, _floor(1), pending_gpus=0) == 0
    assert autoscaling.nodes_to_add(8, 32, _floor(1), pending_gpus=64) == 3  # the ceiling: 4 nodes in all
    assert autoscaling.nodes_to_add(8, 8, _floor(1), pending_gpus=64) == 0  # no ceiling above the floor


def test_added_nodes_running_no_pod_yet_cover_the_demand() -> None:
    added = [StandardNode("std-9", autoscaled=True, busy=False, idle_since=None)]
    assert autoscaling.nodes_to_add(8, 32, _floor(1) + added, pending_gpus=16) == 1
    busy = [StandardNode("std-9", autoscaled=True, busy=True)]
    assert autoscaling.nodes_to_add(8, 32, _floor(1) + busy, pending_gpus=16) == 2


def test_only_added_nodes_idle_for_the_window_go_never_below_the_floor() -> None:
    nodes = [
        StandardNode("std-0", autoscaled=False, busy=False, idle_since=0.0),  # the floor's: never
        StandardNode("std-1", autoscaled=True, busy=False, idle_since=100.0),
        StandardNode("std-2", autoscaled=True, busy=True),  # runs a pod: never
        StandardNode("std-3", autoscaled=True, busy=False, idle_since=50.0),
        StandardNode("std-4", autoscaled=True, busy=False, idle_since=500.0),  # not idle long enough
    ]
    assert autoscaling.nodes_to_remove(8, nodes, now=700.0, idle_window=600.0) == ["std-3", "std-1"]
    assert autoscaling.nodes_to_remove(32, nodes, now=700.0, idle_window=600.0) == ["std-3"]
    assert autoscaling.next_idle_check(nodes, 600.0) == 650.0
    assert autoscaling.ceiling_gpus(16, None) == 16 and autoscaling.ceiling_gpus(16, 64) == 64


# --- the state machine, on a frozen clock ------------------------------------------------------------


def _platform() -> Platform:
    return Platform(clock=EmulatedClock(start=START, speed=0), extra_fields=True)


def _create(platform: Platform, **overrides: object) -> str:
    req = ClusterCreateRequest.model_validate(create_body(**overrides))
    return str(platform.create_cluster("owner", "proj-owner", req)["cluster_id"])


def _autoscaling_cluster(platform: Platform, **overrides: object) -> str:
    cluster_id = _create(platform, auto_scale=True, auto_scale_max_gpus=32, **overrides)
    platform.clock.advance(READY_S)
    return cluster_id


def _standard(view: dict[str, Any]) -> list[str]:
    return [n["node_id"] for n in view["gpu_worker_nodes"] if n["compute_class"] == "standard"]


def _events(view: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    return [e for e in view["node_lifecycle_events"] if e["reason"] == reason]


def test_pending_demand_adds_standard_nodes_after_the_delay_and_num_gpus_stays_the_floor() -> None:
    platform = _platform()
    cluster_id = _autoscaling_cluster(platform, num_preemptible_gpus=8)
    info = platform.set_demand(cluster_id, pending_gpus=16)
    assert info["autoscaled_node_ids"] == []  # not at once: the platform takes a while to notice
    platform.clock.advance(UP - 1)
    assert len(_standard(platform.get_cluster("owner", cluster_id))) == 1
    platform.clock.advance(1)
    view = platform.get_cluster("owner", cluster_id)
    assert len(_standard(view)) == 3
    assert view["num_gpus"] == 8  # the floor the program set
    assert view["auto_scale"] is True and view["auto_scale_max_gpus"] == 32
    assert view["desired_preemptible_gpus"] == 8 and view["allocated_preemptible_gpus"] == 8
    ups = [e for e in _events(view, LifecycleReason.SCALED_UP) if e["node_id"] in _standard(view)]
    assert [e["node_id"] for e in ups] == _standard(view)[1:]
    assert all("autoscaling" in e["message"] for e in ups)
    # The same demand reported again (the pods wait for the nodes to boot) adds nothing more.
    platform.set_demand(cluster_id, pending_gpus=16)
    platform.clock.advance(UP)
    assert len(_standard(platform.get_cluster("owner", cluster_id))) == 3


def test_never_past_the_ceiling_and_nothing_without_auto_scale() -> None:
    platform = _platform()
    cluster_id = _autoscaling_cluster(platform)
    platform.set_demand(cluster_id, pending_gpus=200)
    platform.clock.advance(UP)
    assert len(_standard(platform.get_cluster("owner", cluster_id))) == 4  # 32 GPUs
    plain = _create(platform, cluster_name="plain")
    platform.clock.advance(READY_S)
    platform.set_demand(plain, pending_gpus=64)
    platform.clock.advance(UP + IDLE)
    assert len(_standard(platform.get_cluster("owner", plain))) == 1


def test_idle_added_nodes_go_after_the_window_busy_ones_and_the_floor_stay() -> None:
    platform = _platform()
    cluster_id = _autoscaling_cluster(platform)
    platform.set_demand(cluster_id, pending_gpus=16)
    platform.clock.advance(UP + 120)  # requested, then booted (Running)
    floor_node, first, second = _standard(platform.get_cluster("owner", cluster_id))
    # The pods landed on both; then the one on ``first`` finished.
    platform.set_demand(cluster_id, pending_gpus=0, busy_node_ids=[floor_node, first, second])
    platform.clock.advance(IDLE * 2)
    assert len(_standard(platform.get_cluster("owner", cluster_id))) == 3  # busy: never removed
    platform.set_demand(cluster_id, pending_gpus=0, busy_node_ids=[second])
    platform.clock.advance(IDLE - 1)
    assert len(_standard(platform.get_cluster("owner", cluster_id))) == 3
    platform.clock.advance(1)
    view = platform.get_cluster("owner", cluster_id)
    assert _standard(view) == [floor_node, second]
    downs = _events(view, LifecycleReason.SCALED_DOWN)
    assert [e["node_id"] for e in downs] == [first] and "idle" in downs[0]["message"]
    # ``second``'s pod finishes too: it goes; the floor's node, idle all along, stays.
    platform.set_demand(cluster_id, pending_gpus=0, busy_node_ids=[])
    platform.clock.advance(IDLE * 3)
    assert _standard(platform.get_cluster("owner", cluster_id)) == [floor_node]


def test_on_a_fast_clock_an_added_node_waits_for_its_pod_longer_than_the_scheduler_can_take() -> None:
    """At speed 60 the ten idle minutes would be ten seconds: no longer than a new node's not-ready taint
    plus the scheduler's backoff for a pod it found unschedulable (a CI run saw the node go before its pod
    was bound, and the pods never all ran). The window never drops below the floor."""
    wall = [START]
    platform = Platform(clock=EmulatedClock(start=START, speed=60, real=lambda: wall[0]), extra_fields=True)
    cluster_id = _create(platform, auto_scale=True, auto_scale_max_gpus=16)
    wall[0] += READY_S / 60
    platform.set_demand(cluster_id, pending_gpus=8)
    wall[0] += (UP + 120) / 60  # requested, then booted (Running)
    added = _standard(platform.get_cluster("owner", cluster_id))[1:]
    assert len(added) == 1
    platform.set_demand(cluster_id, pending_gpus=8, busy_node_ids=[])  # the pod not bound yet
    wall[0] += IDLE / 60 + 5  # past the nominal window shortened by the speed
    assert _standard(platform.get_cluster("owner", cluster_id))[1:] == added
    platform.set_demand(cluster_id, pending_gpus=0, busy_node_ids=[])  # the pod went elsewhere
    wall[0] += autoscaling.IDLE_WINDOW_FLOOR_S
    assert _standard(platform.get_cluster("owner", cluster_id))[1:] == []


def test_a_higher_floor_takes_in_added_nodes_a_lower_one_hands_them_to_autoscaling() -> None:
    platform = _platform()
    cluster_id = _autoscaling_cluster(platform)
    platform.set_demand(cluster_id, pending_gpus=16)
    platform.clock.advance(UP + 120)
    nodes = _standard(platform.get_cluster("owner", cluster_id))
    platform.update_cluster("owner", cluster_id, ClusterUpdateRequest(num_gpus=16))
    platform.set_demand(cluster_id, pending_gpus=0, busy_node_ids=[])
    platform.clock.advance(IDLE * 2)
    assert (
        _standard(platform.get_cluster("owner", cluster_id)) == nodes[:2]
    )  # the first added one is the floor's
    platform.update_cluster("owner", cluster_id, ClusterUpdateRequest(num_gpus=8))
    assert _standard(platform.get_cluster("owner", cluster_id)) == nodes[:2]  # not at once
    platform.clock.advance(IDLE)
    assert _standard(platform.get_cluster("owner", cluster_id)) == nodes[:1]


def test_autoscaling_survives_a_restart(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.sqlite")
    platform = Platform(clock=EmulatedClock(start=START, speed=0), store=store)
    cluster_id = _autoscaling_cluster(platform)
    platform.set_demand(cluster_id, pending_gpus=8)
    platform.flush()
    store.close()
    restored = Platform(store=Store(tmp_path / "state.sqlite"), speed=0)
    restored.clock.advance(UP)
    assert len(restored.get_cluster("owner", cluster_id)["gpu_worker_nodes"]) == 2


# --- through the API -----------------------------------------------------------------------------------


def test_api_autoscaling_cluster_grows_and_shrinks_on_reported_demand(http: Any, admin: Any) -> None:
    client = http()
    body = create_body(num_gpus=8, auto_scale=True, auto_scale_max_gpus=24)
    cluster_id = client.post("/v1/compute/clusters", json=body).json()["cluster_id"]
    admin.advance(READY_S)
    admin.set_demand(cluster_id, pending_gpus=16)
    admin.advance(UP + 120)
    cluster = strict_cluster(
        client.get(f"/v1/compute/clusters/{cluster_id}").text
    )  # no field beyond the SDK's
    assert cluster.num_gpus == 8
    assert [n.status for n in cluster.gpu_worker_nodes] == ["Ready"] * 3
    added = [n.node_id for n in cluster.gpu_worker_nodes[1:]]
    assert [e.node_id for e in cluster.node_lifecycle_events or [] if e.reason == "TogetherScaledUp"] == added
    info = admin.set_demand(cluster_id, pending_gpus=0, busy_node_ids=[])
    assert info["autoscaled_node_ids"] == added
    admin.advance(IDLE)
    cluster = strict_cluster(client.get(f"/v1/compute/clusters/{cluster_id}").text)
    assert len(cluster.gpu_worker_nodes) == 1 and cluster.num_gpus == 8
    gone = [e.node_id for e in cluster.node_lifecycle_events or [] if e.reason == "TogetherScaledDown"]
    assert sorted(gone) == sorted(added)
    assert (
        http().post("/_emulator/autoscaling", json={"cluster_id": "nope", "pending_gpus": 8}).status_code
        == 404
    )


# --- the demand the twin reads from a cluster's pods ------------------------------------------------------


def _pod(gpus: int, node: str | None = None, phase: str = "Pending", **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}}
    conditions = [] if node else [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return {
        "metadata": {"name": "p"},
        "spec": {"containers": [container], **({"nodeName": node} if node else {}), **spec},
        "status": {"phase": phase, "conditions": conditions},
    }


def _required(operator: str, values: list[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": COMPUTE_CLASS_LABEL, "operator": operator, "values": values}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def test_pending_gpu_pods_a_standard_node_could_take_are_the_demand() -> None:
    scheduling = _pod(8)
    scheduling["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    ]
    pods = [
        _pod(8),
        _pod(4),
        _pod(0),  # no GPU: no GPU node helps it
        _pod(16),  # more than a node: no node added could take it
        _pod(8, nodeSelector={COMPUTE_CLASS_LABEL: "preemptible"}),
        _pod(8, affinity=_required("In", ["preemptible"])),
        _pod(8, affinity=_required("NotIn", ["preemptible"])),  # standard only: counted
        scheduling,
        _pod(8, node="gpu-dp-1-1", phase="Running"),
        _pod(8, node="gpu-dp-1-2", phase="Succeeded"),
        {
            **_pod(0, node="gpu-dp-1-3", phase="Running"),
            "metadata": {"ownerReferences": [{"kind": "DaemonSet"}]},
        },
        _pod(0, node="gpu-dp-1-4", phase="Running"),  # any pod keeps its node busy
    ]
    assert demand_of(pods) == Demand(pending_gpus=20, busy_nodes=frozenset({"gpu-dp-1-1", "gpu-dp-1-4"}))
    assert demand_of([]) == Demand(0, frozenset())


def test_the_twin_reads_the_demand_of_autoscaling_clusters_only() -> None:
    platform = _platform()
    auto, plain = _autoscaling_cluster(platform), _create(platform, cluster_name="plain")
    views = {
        record.cluster_id: cluster_view(record, platform.clock.now())
        for record in platform._sim.clusters.values()
    }
    assert views[auto].autoscales and not views[plain].autoscales
