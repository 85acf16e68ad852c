"""What each remediation mode does to a cluster's Kubernetes nodes, in the twin (issue 32, part 2).

One node with one running pod per mode, on the package's shared cluster: the pod is terminated as the mode
implies (a drain with the pod's grace period for the modes that delete the VM, killed at once for a reboot or
a power cycle), the node ends as the mode implies (a new name, gone, or the same name back, uncordoned and
Ready), an Event records the repair, and the compute API's node listing agrees with the Kubernetes Nodes.
The cluster is left with its node set (an eviction's lost node is ordered back).

Oracles: the compute API (the remediation's states, ``gpu_worker_nodes``), the admin API (the replacement
instance), and the cluster's own Kubernetes API.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from together_clusters.emulator.kubernetes.kwok_config import TERMINATION_DURATION
from together_clusters.emulator.kubernetes.nodes import node_name
from together_clusters.emulator.server import RunningEmulator
from together_clusters.platform import REMEDIATION_ANNOTATION, RemediationReason

from ._repairs import remediation_timings
from ._twin import COMPUTE_CLASS, TwinCluster, no_namespace_terminating, wait_for

pytestmark = pytest.mark.twin


@pytest.fixture(autouse=True)
def owns_its_nodes(cluster: TwinCluster) -> None:
    """These tests drain nodes: none starts while an earlier test's pods are still on the shared cluster."""
    no_namespace_terminating(cluster)


VM_ONLY = "REMEDIATION_MODE_VM_ONLY"
HOST_AWARE = "REMEDIATION_MODE_HOST_AWARE"
EVICT = "REMEDIATION_MODE_EVICT_WITHOUT_REPLACEMENT"
REBOOT_VM = "REMEDIATION_MODE_REBOOT_VM"
HOST_POWER_CYCLE = "REMEDIATION_MODE_HOST_POWER_CYCLE"
# Nominal seconds; at the package's speed 60 a RUNNING state of 300 s lasts 5 real seconds: long enough to
# see a drained pod terminating, short enough to keep the module cheap.
TIMINGS = {
    "pending_s": 30,
    "quarantining_s": 180,
    "quarantined_s": 30,
    "running_s": {mode: 300 for mode in (VM_ONLY, HOST_AWARE, EVICT, REBOOT_VM, HOST_POWER_CYCLE)},
}
GRACE = 300
"""The test pod's own grace period (the platform's limit too): what a drain gives it."""


@pytest.fixture(scope="module", autouse=True)
def timings(twin_emulator: RunningEmulator) -> Iterator[None]:
    with remediation_timings(twin_emulator.admin, TIMINGS):
        yield


# --- helpers ---------------------------------------------------------------------------------------


def victim(cluster: TwinCluster, compute_class: str) -> str:
    """A Ready, schedulable Node of ``compute_class`` (the newest, so the drills' oldest-first is kept)."""
    cluster.wait_for_nodes(standard=1, preemptible=2)
    names = [name for name, cls in cluster.node_classes().items() if cls == compute_class]
    return max(names, key=lambda name: int(name.rsplit("-", 1)[1]))


def instance_of(cluster: TwinCluster, name: str) -> str:
    node = next(n for n in cluster.get()["gpu_worker_nodes"] if node_name(n["node_id"]) == name)
    return str(node["instance_id"])


def run_pod(cluster: TwinCluster, namespace: str, node: str, slow_exit: bool = True) -> None:
    """The pod ``work`` pinned to ``node``, running. ``slow_exit``: once terminated it would take an hour to
    exit, so a drain leaves it terminating (grace period ``GRACE``) until the node goes, and only a kill
    removes it at once."""
    annotations = {TERMINATION_DURATION: "1h"} if slow_exit else {}
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "work", "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": GRACE,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"key": COMPUTE_CLASS, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "registry.invalid/trainer:1"}],
        },
    }
    cluster.core.create_namespaced_pod(namespace, manifest)
    wait_for(lambda: _phase(cluster, namespace) == "Running", "the pod to run")


def _phase(cluster: TwinCluster, namespace: str) -> str | None:
    found = pod(cluster, namespace, "work")
    return None if found is None else str(found.status.phase)


def pod(cluster: TwinCluster, namespace: str, name: str) -> Any:
    try:
        return cluster.core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def node_or_none(cluster: TwinCluster, name: str) -> client.V1Node | None:
    try:
        return cluster.core.read_node(name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def platform_taints(node: client.V1Node) -> list[tuple[str, str, str]]:
    """The Node's taints but the node lifecycle controller's (``node.kubernetes.io/...``, set and lifted on
    its own while a new Node becomes Ready)."""
    taints = node.spec.taints or []
    return [(t.key, t.value, t.effect) for t in taints if not t.key.startswith("node.kubernetes.io/")]


def ready(node: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def create(cluster: TwinCluster, instance_id: str, mode: str) -> dict[str, Any]:
    reply = cluster.http.post(
        f"/v1/compute/clusters/{cluster.cluster_id}/instances/{instance_id}/remediations",
        json={"mode": mode, "reason": "twin test"},
    )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def approve(cluster: TwinCluster, rem: dict[str, Any]) -> None:
    path = (
        f"/v1/compute/clusters/{cluster.cluster_id}/instances/{rem['instance_id']}/remediations/{rem['id']}"
    )
    reply = cluster.http.post(f"{path}/approve", json={})
    assert reply.status_code == 200, reply.text


def read(cluster: TwinCluster, rem: dict[str, Any]) -> dict[str, Any]:
    reply = cluster.http.get(
        f"/v1/compute/clusters/{cluster.cluster_id}/instances/{rem['instance_id']}/remediations/{rem['id']}"
    )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def wait_state(cluster: TwinCluster, rem: dict[str, Any], *states: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        found = read(cluster, rem)
        return found if found["state"] in states else None

    return wait_for(reached, f"remediation {rem['id']} to be {' or '.join(states)}", timeout=60)


def api_nodes(cluster: TwinCluster) -> set[str]:
    return {node_name(n["node_id"]) for n in cluster.get()["gpu_worker_nodes"]}


def listing_agrees(cluster: TwinCluster) -> set[str]:
    """Wait until the compute API's nodes and the Kubernetes Nodes are the same names; those names."""

    def agreed() -> set[str] | None:
        names = api_nodes(cluster)
        return names if names == set(cluster.node_classes()) else None

    return wait_for(agreed, "the API's node listing and the Kubernetes Nodes to agree", timeout=60)


def remediation_events(cluster: TwinCluster, name: str) -> dict[str, str]:
    """The remediation Events recorded on the Node ``name``: reason -> message."""
    events = cluster.core.list_event_for_all_namespaces(field_selector=f"involvedObject.name={name}").items
    return {e.reason: e.message for e in events if (e.reason or "").startswith("TogetherRemediation")}


def succeeded_event(cluster: TwinCluster, name: str) -> bool:
    return RemediationReason.SUCCEEDED in remediation_events(cluster, name)


def replacement_of(cluster: TwinCluster, rem: dict[str, Any]) -> str:
    found = next(r for r in cluster.emulator.admin.remediations() if r["id"] == rem["id"])
    assert found["replacement_node_id"], found
    return node_name(found["replacement_node_id"])


def drained_while_running(cluster: TwinCluster, namespace: str, name: str, rem: dict[str, Any]) -> None:
    """While the repair runs the node is cordoned and the pod terminates with its own grace period."""
    wait_state(cluster, rem, "RUNNING")

    def terminating_pod() -> Any:
        found = pod(cluster, namespace, "work")
        return found if found is not None and found.metadata.deletion_timestamp else None

    terminating = wait_for(terminating_pod, "the pod to be terminating", timeout=30)
    assert terminating.metadata.deletion_grace_period_seconds == GRACE
    node = cluster.core.read_node(name)
    assert node.spec.unschedulable
    assert (node.metadata.annotations or {}).get(REMEDIATION_ANNOTATION) == rem["id"]
    assert read(cluster, rem)["state"] == "RUNNING", "the drain must be seen while the repair runs"


def killed_while_running(cluster: TwinCluster, namespace: str, name: str, rem: dict[str, Any]) -> None:
    """A reboot does not wait for a grace period: the pod is gone at once, its node still there, cordoned."""
    wait_state(cluster, rem, "RUNNING")
    wait_for(lambda: pod(cluster, namespace, "work") is None, "the pod to be killed", timeout=30)
    assert read(cluster, rem)["state"] == "RUNNING", "the pod must go at once, not when the node does"
    node = cluster.core.read_node(name)
    assert node.spec.unschedulable


def came_back(cluster: TwinCluster, name: str) -> client.V1Node:
    """The Node ``name`` once it is there, uncordoned and Ready."""

    def back() -> client.V1Node | None:
        node = node_or_none(cluster, name)
        return node if node is not None and not node.spec.unschedulable and ready(node) else None

    return wait_for(back, f"{name} to be back, uncordoned and Ready", timeout=30)


# --- the modes -------------------------------------------------------------------------------------


def test_vm_only_drains_the_node_and_a_new_one_joins_in_its_place(
    cluster: TwinCluster, namespace: str
) -> None:
    name = victim(cluster, "preemptible")
    old = cluster.core.read_node(name)
    run_pod(cluster, namespace, name)
    rem = create(cluster, instance_of(cluster, name), VM_ONLY)

    drained_while_running(cluster, namespace, name, rem)
    wait_state(cluster, rem, "SUCCEEDED")
    new_name = replacement_of(cluster, rem)
    assert new_name != name
    new = came_back(cluster, new_name)
    wait_for(lambda: node_or_none(cluster, name) is None, f"{name} to be deleted", timeout=30)
    wait_for(lambda: pod(cluster, namespace, "work") is None, "the drained pod to be collected", timeout=30)
    assert new.metadata.labels[COMPUTE_CLASS] == old.metadata.labels[COMPUTE_CLASS] == "preemptible"
    assert platform_taints(new) == platform_taints(old) == [(COMPUTE_CLASS, "preemptible", "NoSchedule")]
    assert REMEDIATION_ANNOTATION not in (new.metadata.annotations or {})
    names = listing_agrees(cluster)
    assert new_name in names and name not in names
    assert RemediationReason.STARTED in remediation_events(cluster, name)
    assert RemediationReason.SUCCEEDED in wait_for(
        lambda: remediation_events(cluster, new_name), "the repair's Event on the new node", timeout=30
    )


def test_host_aware_cordons_the_host_first_then_drains_and_replaces(
    cluster: TwinCluster, namespace: str
) -> None:
    name = victim(cluster, "preemptible")
    run_pod(cluster, namespace, name)
    # Raised by the health checks and approved, as an automated repair goes.
    rem = cluster.emulator.admin.raise_remediation(cluster.cluster_id, instance_of(cluster, name), HOST_AWARE)
    approve(cluster, rem)

    wait_state(cluster, rem, "QUARANTINING", "QUARANTINED")
    wait_for(lambda: cluster.core.read_node(name).spec.unschedulable, "the host to be cordoned", timeout=30)
    quarantined = pod(cluster, namespace, "work")
    assert quarantined.metadata.deletion_timestamp is None, "quarantine cordons; the pods go when it runs"
    assert read(cluster, rem)["state"] in ("QUARANTINING", "QUARANTINED")

    drained_while_running(cluster, namespace, name, rem)
    wait_state(cluster, rem, "SUCCEEDED")
    new_name = replacement_of(cluster, rem)
    came_back(cluster, new_name)
    wait_for(lambda: node_or_none(cluster, name) is None, f"{name} to be deleted", timeout=30)
    assert new_name in listing_agrees(cluster)


def test_evict_without_replacement_drains_and_the_node_is_gone(cluster: TwinCluster, namespace: str) -> None:
    name = victim(cluster, "preemptible")
    run_pod(cluster, namespace, name)
    rem = create(cluster, instance_of(cluster, name), EVICT)
    try:
        drained_while_running(cluster, namespace, name, rem)
        wait_state(cluster, rem, "SUCCEEDED")
        wait_for(lambda: node_or_none(cluster, name) is None, f"{name} to be deleted", timeout=30)
        wait_for(
            lambda: pod(cluster, namespace, "work") is None, "the drained pod to be collected", timeout=30
        )
        names = listing_agrees(cluster)
        assert name not in names
        assert sorted(cluster.node_classes().values()) == ["preemptible", "standard"], "one node short"
        assert cluster.get()["desired_preemptible_gpus"] == 8
        assert RemediationReason.SUCCEEDED in remediation_events(cluster, name)
    finally:
        # The package's cluster keeps its node set: order the evicted node back.
        cluster.update(num_preemptible_gpus=16)
        cluster.wait_for_nodes(standard=1, preemptible=2)


def test_reboot_vm_of_a_standard_node_kills_its_pods_and_the_same_node_comes_back(
    cluster: TwinCluster, namespace: str
) -> None:
    name = victim(cluster, "standard")
    run_pod(cluster, namespace, name)
    rem = create(cluster, instance_of(cluster, name), REBOOT_VM)

    killed_while_running(cluster, namespace, name, rem)
    wait_state(cluster, rem, "SUCCEEDED")
    node = came_back(cluster, name)
    assert node.metadata.labels[COMPUTE_CLASS] == "standard"
    assert REMEDIATION_ANNOTATION not in (node.metadata.annotations or {})
    assert name in listing_agrees(cluster)
    events = wait_for(
        lambda: remediation_events(cluster, name) if succeeded_event(cluster, name) else None,
        "the repair's Events",
        timeout=30,
    )
    assert RemediationReason.STARTED in events


def test_host_power_cycle_cordons_kills_at_once_and_the_node_comes_back(
    cluster: TwinCluster, namespace: str
) -> None:
    name = victim(cluster, "preemptible")
    run_pod(cluster, namespace, name)
    rem = create(cluster, instance_of(cluster, name), HOST_POWER_CYCLE)

    wait_state(cluster, rem, "QUARANTINING", "QUARANTINED")
    wait_for(lambda: cluster.core.read_node(name).spec.unschedulable, "the host to be cordoned", timeout=30)
    assert pod(cluster, namespace, "work").metadata.deletion_timestamp is None
    killed_while_running(cluster, namespace, name, rem)
    wait_state(cluster, rem, "SUCCEEDED")
    came_back(cluster, name)
    assert name in listing_agrees(cluster)


def test_a_failed_repair_uncordons_the_node_it_cordoned(cluster: TwinCluster, namespace: str) -> None:
    name = victim(cluster, "preemptible")
    # Exits at once when terminated: the failed repair leaves the node, so nothing would collect it.
    run_pod(cluster, namespace, name, slow_exit=False)
    rem = cluster.emulator.admin.raise_remediation(
        cluster.cluster_id, instance_of(cluster, name), VM_ONLY, outcome="fail"
    )
    # The cordon and the drain are seen while the repair runs, and it runs 5 real seconds at the module's
    # timings: a test process starved that long on a loaded machine (CI, three workers on two cores) missed
    # the window and waited for a state already gone. Here it runs 20 s.
    longer = {**TIMINGS, "running_s": {**TIMINGS["running_s"], VM_ONLY: 1200}}
    with remediation_timings(cluster.emulator.admin, longer):
        approve(cluster, rem)
        wait_state(cluster, rem, "RUNNING")
        wait_for(lambda: cluster.core.read_node(name).spec.unschedulable, "the node to be cordoned", timeout=30)
        wait_for(lambda: _phase(cluster, namespace) in (None, "Failed"), "the pod to be drained", timeout=30)
        wait_state(cluster, rem, "FAILED")
    node = came_back(cluster, name)
    assert REMEDIATION_ANNOTATION not in (node.metadata.annotations or {})
    assert name in listing_agrees(cluster)
    assert RemediationReason.FAILED in wait_for(
        lambda: remediation_events(cluster, name), "the failure's Event", timeout=30
    )
