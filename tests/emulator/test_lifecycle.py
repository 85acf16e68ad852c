"""Cluster phases follow the emulated clock; deletion goes through Deleting; provisioning faults."""

from __future__ import annotations

from typing import Any

import pytest
import together

from .conftest import create_body
from .strict import strict_cluster

HAPPY_PATH = [
    "CLUSTER_PHASE_QUEUED",
    "CLUSTER_PHASE_WAITING_FOR_CONTROL_PLANE_NODES",
    "CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES",
    "CLUSTER_PHASE_INSTALLING_DRIVERS",
    "CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS",
    "CLUSTER_PHASE_READY",
]


def _get(http: Any, cluster_id: str) -> Any:
    reply = http.get(f"/v1/compute/clusters/{cluster_id}")
    assert reply.status_code == 200, reply.text
    return strict_cluster(reply.text)


def test_phases_progress_with_the_clock(http: Any, admin: Any) -> None:
    client = http()
    cluster_id = client.post("/v1/compute/clusters", json=create_body(num_gpus=16)).json()["cluster_id"]
    seen_status = []
    for _ in range(14):
        cluster = _get(client, cluster_id)
        seen_status.append(cluster.status)
        admin.advance(50)
    cluster = _get(client, cluster_id)
    assert [t.phase for t in cluster.phase_transitions] == HAPPY_PATH
    times = [t.transition_time for t in cluster.phase_transitions]
    assert times == sorted(times)
    assert (times[-1] - times[0]).total_seconds() == pytest.approx(600)
    assert list(dict.fromkeys(seen_status)) == [
        "WaitingForControlPlaneNodes",
        "WaitingForDataPlaneNodes",
        "InstallingDrivers",
        "RunningAcceptanceTests",
        "Ready",
    ]
    assert cluster.first_ready_at == times[-1] and cluster.created_at == times[0]
    assert [n.status for n in cluster.control_plane_nodes] == ["Ready"]
    assert len(cluster.gpu_worker_nodes) == 2
    for node in cluster.gpu_worker_nodes:
        assert [t.phase for t in node.phase_transitions] == [
            "NODE_PHASE_PENDING",
            "NODE_PHASE_BOOTING",
            "NODE_PHASE_RUNNING",
        ]
        assert node.status == "Ready" and node.num_gpus == 8


def test_standard_scale_up_and_down(sdk: Any, admin: Any) -> None:
    client = sdk()
    cluster = client.clusters.create(**create_body(num_gpus=16))
    admin.advance(600)
    grown = client.clusters.update(cluster.cluster_id, num_gpus=24)
    assert grown.num_gpus == 24
    new = [n for n in grown.gpu_worker_nodes if n.status != "Ready"]
    assert len(new) == 1 and new[0].status == "Pending"
    admin.advance(120)
    assert all(n.status == "Ready" for n in client.clusters.retrieve(cluster.cluster_id).gpu_worker_nodes)
    shrunk = client.clusters.update(cluster.cluster_id, num_gpus=8)
    assert len(shrunk.gpu_worker_nodes) == 1 and len(shrunk.deleted_gpu_worker_nodes or []) == 2
    assert all(n.deleted_at is not None for n in shrunk.deleted_gpu_worker_nodes or [])
    reasons = [e.reason for e in shrunk.node_lifecycle_events or []]
    assert reasons == ["TogetherScaledUp", "TogetherScaledDown", "TogetherScaledDown"]


def test_delete_goes_through_deleting_then_404(sdk: Any, admin: Any) -> None:
    client = sdk()
    cluster = client.clusters.create(**create_body())
    admin.advance(600)
    assert client.clusters.delete(cluster.cluster_id).cluster_id == cluster.cluster_id
    deleting = client.clusters.retrieve(cluster.cluster_id)
    assert deleting.status == "Deleting"
    assert deleting.phase_transitions[-1].phase == "CLUSTER_PHASE_DELETING"
    # Deleting twice is fine; updating a deleting cluster is not.
    assert client.clusters.delete(cluster.cluster_id).cluster_id == cluster.cluster_id
    with pytest.raises(together.ConflictError):
        client.clusters.update(cluster.cluster_id, num_gpus=16)
    admin.advance(59)
    assert client.clusters.retrieve(cluster.cluster_id).status == "Deleting"
    admin.advance(2)
    with pytest.raises(together.NotFoundError):
        client.clusters.retrieve(cluster.cluster_id)
    with pytest.raises(together.NotFoundError):
        client.clusters.delete(cluster.cluster_id)
    assert admin.clusters() == []


def test_delete_during_provisioning(sdk: Any, admin: Any) -> None:
    client = sdk()
    cluster = client.clusters.create(**create_body())
    admin.advance(30)
    deleting = client.clusters.delete(cluster.cluster_id)
    assert deleting.cluster_id == cluster.cluster_id
    admin.advance(1000)
    assert admin.clusters() == []


@pytest.mark.parametrize(
    ("outcome", "last_phase", "status"),
    [
        ("acceptance_tests_failed", "CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED", "Degraded"),
        ("nccl_tests_failed", "CLUSTER_PHASE_NCCL_TESTS_FAILED", "Degraded"),
        ("stuck", "CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES", "WaitingForDataPlaneNodes"),
    ],
)
def test_provisioning_faults_never_reach_ready(
    http: Any, admin: Any, outcome: str, last_phase: str, status: str
) -> None:
    client = http()
    assert admin.add_provisioning_fault(outcome, count=1) == [outcome]
    failing = client.post("/v1/compute/clusters", json=create_body(cluster_name="bad")).json()["cluster_id"]
    healthy = client.post("/v1/compute/clusters", json=create_body(cluster_name="good")).json()["cluster_id"]
    admin.advance(3600)
    cluster = _get(client, failing)
    assert cluster.phase_transitions[-1].phase == last_phase
    assert cluster.status == status and cluster.first_ready_at is None
    if outcome == "stuck":
        assert all(n.status == "Pending" for n in cluster.gpu_worker_nodes)
    assert _get(client, healthy).status == "Ready"
    # A cluster that never got ready can still be deleted.
    assert client.delete(f"/v1/compute/clusters/{failing}").status_code == 200
    admin.advance(120)
    assert client.get(f"/v1/compute/clusters/{failing}").status_code == 404


def test_clock_runs_at_speed(http: Any, admin: Any) -> None:
    admin.set_speed(600)
    client = http()
    cluster_id = client.post("/v1/compute/clusters", json=create_body()).json()["cluster_id"]
    import time

    deadline = time.monotonic() + 10
    while _get(client, cluster_id).status != "Ready":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    admin.set_speed(0)


def test_scaling_down_a_node_that_never_appeared_leaves_no_trace(sdk: Any, admin: Any) -> None:
    client = sdk()
    cluster = client.clusters.create(**create_body())
    admin.advance(30)
    client.clusters.update(cluster.cluster_id, num_gpus=16)
    client.clusters.update(cluster.cluster_id, num_gpus=8)
    admin.advance(600)
    done = client.clusters.retrieve(cluster.cluster_id)
    assert len(done.gpu_worker_nodes) == 1 and not done.deleted_gpu_worker_nodes
    assert done.node_lifecycle_events == []


def test_deletion_stops_provisioning_where_it_is(http: Any, admin: Any) -> None:
    client = http()
    late = client.post("/v1/compute/clusters", json=create_body(cluster_name="late")).json()["cluster_id"]
    admin.advance(120)
    early = client.post("/v1/compute/clusters", json=create_body(cluster_name="early")).json()["cluster_id"]
    admin.advance(5)
    for cluster_id in (early, late):
        client.delete(f"/v1/compute/clusters/{cluster_id}")
    admin.advance(50)
    # Deleted before its control plane appeared: none ever shows up.
    assert _get(client, early).control_plane_nodes == []
    deleting = _get(client, late)
    assert deleting.status == "Deleting"
    assert [n.status for n in deleting.gpu_worker_nodes] == ["Pending"]
    assert [t.phase for t in deleting.phase_transitions][-2:] == [
        "CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES",
        "CLUSTER_PHASE_DELETING",
    ]
    assert deleting.control_plane_ready is False


def test_stuck_cluster_gets_no_running_node_of_any_class(http: Any, admin: Any) -> None:
    admin.add_provisioning_fault("stuck")
    client = http()
    body = create_body(num_preemptible_gpus=8)
    cluster_id = client.post("/v1/compute/clusters", json=body).json()["cluster_id"]
    admin.advance(3600)
    cluster = _get(client, cluster_id)
    assert cluster.allocated_preemptible_gpus == 8
    assert [n.status for n in cluster.gpu_worker_nodes] == ["Pending", "Pending"]


def test_events_are_in_time_order(sdk: Any, admin: Any) -> None:
    client = sdk()
    cluster = client.clusters.create(**create_body(num_preemptible_gpus=8))
    admin.advance(30)
    # Scheduled to appear with the data plane at 120 s, after the preemption below.
    client.clusters.update(cluster.cluster_id, num_gpus=16)
    admin.advance(10)
    admin.preempt(cluster.cluster_id)
    admin.advance(200)
    events = client.clusters.retrieve(cluster.cluster_id).node_lifecycle_events or []
    assert [e.reason for e in events] == ["TogetherScaledUp", "TogetherPreempted", "TogetherScaledUp"]
    assert [e.timestamp for e in events] == sorted(e.timestamp for e in events)


def test_duration_days_shows_as_duration_hours(sdk: Any) -> None:
    body = create_body(billing_type="RESERVED", duration_days=3)
    assert sdk().clusters.create(**body).duration_hours == 72
