"""What the twin does to a Node for each remediation transition (emulator/kubernetes/repairs.py), on a fake
Kubernetes API (the real one: tests/twin/test_remediation_nodes.py)."""

from __future__ import annotations

import copy
import json
from typing import Any, cast

from kubernetes import client

from together_clusters.emulator import remediations
from together_clusters.emulator.kubernetes import repairs
from together_clusters.emulator.kubernetes.kwok_config import TERMINATION_EXIT_CODE
from together_clusters.emulator.remediations import RemediationTransition
from together_clusters.platform import REMEDIATION_ANNOTATION, ComputeClass, RemediationReason

NODE = "gpu-preemptible-dp-1-2"
T0 = 1_800_000_000.0


def model(data: Any, kind: str) -> Any:
    return client.ApiClient().deserialize(json.dumps(data), kind, "application/json")


def a_pod(name: str, grace: int = 600, daemonset: bool = False, phase: str = "Running") -> dict[str, Any]:
    owners = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u"}] if daemonset else []
    return {
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": grace, "containers": []},
        "status": {"phase": phase},
    }


class FakeCore:
    """A cluster's Nodes, pods and Events, as much of CoreV1Api as the repairs use."""

    def __init__(self, pods: list[dict[str, Any]], unschedulable: bool = False) -> None:
        self.node: dict[str, Any] | None = {
            "metadata": {"name": NODE, "uid": "uid-1", "annotations": {}},
            "spec": {"unschedulable": unschedulable},
        }
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.deletions: dict[str, int] = {}
        self.killed: dict[str, str] = {}
        self.events: list[dict[str, Any]] = []

    def read_node(self, name: str, **_: Any) -> Any:
        if self.node is None or name != NODE:
            raise client.exceptions.ApiException(status=404)
        return model(self.node, "V1Node")

    def patch_node(self, name: str, body: dict[str, Any], **_: Any) -> Any:
        assert self.node is not None and name == NODE
        self.node["spec"]["unschedulable"] = body["spec"]["unschedulable"]
        annotations = self.node["metadata"]["annotations"]
        for key, value in body["metadata"]["annotations"].items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        return model(self.node, "V1Node")

    def delete_node(self, name: str, **_: Any) -> None:
        self.node = None

    def list_pod_for_all_namespaces(self, field_selector: str, **_: Any) -> Any:
        assert field_selector == f"spec.nodeName={NODE}"
        return model({"items": list(copy.deepcopy(list(self.pods.values())))}, "V1PodList")

    def patch_namespaced_pod(self, name: str, namespace: str, body: dict[str, Any], **_: Any) -> Any:
        pod = self.pods[name]
        pod["metadata"].setdefault("annotations", {}).update(body["metadata"]["annotations"])
        self.killed[name] = body["metadata"]["annotations"][TERMINATION_EXIT_CODE]
        return model(pod, "V1Pod")

    def delete_namespaced_pod(self, name: str, namespace: str, grace_period_seconds: int, **_: Any) -> None:
        self.deletions[name] = grace_period_seconds
        if grace_period_seconds == 0:
            del self.pods[name]
        else:
            self.pods[name]["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
            self.pods[name]["metadata"]["deletionGracePeriodSeconds"] = grace_period_seconds

    def patch_namespaced_pod_status(self, name: str, namespace: str, body: dict[str, Any], **_: Any) -> None:
        self.pods[name]["status"]["phase"] = body["status"]["phase"]

    def create_namespaced_event(self, namespace: str, body: dict[str, Any], **_: Any) -> None:
        self.events.append(body)

    def reasons(self) -> list[tuple[str, str]]:
        return [(e["involvedObject"]["name"], e["reason"]) for e in self.events]

    def cordoned_by(self) -> tuple[bool, str | None]:
        assert self.node is not None
        return self.node["spec"]["unschedulable"], self.node["metadata"]["annotations"].get(
            REMEDIATION_ANNOTATION
        )


def play(core: FakeCore, step: RemediationTransition) -> None:
    repairs.play(cast(Any, core), step)


def transition(mode: str, state: str, **fields: Any) -> RemediationTransition:
    return RemediationTransition(
        cluster_id="c-1",
        remediation_id="r-1",
        instance_id="i-1",
        node_id=NODE,
        compute_class=ComputeClass.PREEMPTIBLE,
        mode=mode,
        trigger=remediations.MANUAL,
        state=state,
        at=T0,
        **fields,
    )


def test_a_reboot_kills_every_pod_at_once_and_the_node_comes_back_uncordoned() -> None:
    core = FakeCore([a_pod("work"), a_pod("agent", daemonset=True), a_pod("done", phase="Succeeded")])
    play(core, transition(remediations.REBOOT_VM, "RUNNING"))
    assert core.deletions == {"work": 0, "agent": 0}
    # A simulated pod ends as a SIGKILL ends a container (137), not as a SIGTERM it saved on (143).
    assert core.killed == {"work": "137", "agent": "137"}
    assert core.cordoned_by() == (True, "r-1")
    play(core, transition(remediations.REBOOT_VM, "SUCCEEDED"))
    assert core.cordoned_by() == (None, None)
    assert core.reasons() == [(NODE, RemediationReason.STARTED), (NODE, RemediationReason.SUCCEEDED)]


def test_a_replacement_drains_with_the_pods_grace_and_the_event_goes_to_the_new_node() -> None:
    core = FakeCore([a_pod("work", grace=600), a_pod("short", grace=20), a_pod("agent", daemonset=True)])
    play(core, transition(remediations.VM_ONLY, "RUNNING"))
    assert core.deletions == {"work": 300, "short": 20}, "the pod's grace, at most the platform's limit"
    replaced = transition(
        remediations.VM_ONLY,
        "SUCCEEDED",
        replacement_instance_id="i-2",
        replacement_node_id="gpu-preemptible-dp-1-3",
    )
    play(core, replaced)
    assert core.node is None and not core.pods, "the old Node deleted, its pods collected"
    assert core.reasons()[-1] == ("gpu-preemptible-dp-1-3", RemediationReason.SUCCEEDED)


def test_quarantine_only_cordons() -> None:
    core = FakeCore([a_pod("work")])
    play(core, transition(remediations.HOST_AWARE, "QUARANTINING"))
    assert core.cordoned_by() == (True, "r-1") and not core.deletions
    assert core.reasons() == [(NODE, RemediationReason.CORDONED)]


def test_the_end_of_a_repair_leaves_a_cordon_it_did_not_set() -> None:
    core = FakeCore([a_pod("work")], unschedulable=True)
    play(core, transition(remediations.REBOOT_VM, "RUNNING"))
    play(core, transition(remediations.REBOOT_VM, "FAILED"))
    assert core.cordoned_by() == (True, None)


def test_a_failed_or_cancelled_repair_uncordons_only_what_it_cordoned() -> None:
    core = FakeCore([a_pod("work")])
    play(core, transition(remediations.VM_ONLY, "CANCELLED"))
    assert core.cordoned_by() == (False, None) and not core.events, "cancelled before it ran: nothing to undo"
    play(core, transition(remediations.VM_ONLY, "RUNNING"))
    play(core, transition(remediations.VM_ONLY, "FAILED"))
    assert core.cordoned_by() == (None, None)
    assert core.reasons()[-1] == (NODE, RemediationReason.FAILED)
