"""The ``RemediationGate`` component through the real engine on the twin (issue 32, part 4): ``pulumi up``
deploys the gate (its Deployment on a standard node, its ServiceAccount and ClusterRole, the API key in a
Secret); the gate's pod runs as a local process with its own service account's token, so the real API server's
RBAC decides what it may do; the platform raises an automated ``REBOOT_VM`` of the node under a training step.

Oracles: the compute API's remediation state polled by the test, the checkpoint folder read the moment the
approval is seen, the replacement pod's log, the API server's own SubjectAccessReview for the gate's
ServiceAccount, and the exported state (no API key in plain text).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests import _engine
from together_clusters.platform import REMEDIATION_GATE_ANNOTATION

from ._twin import DRIVER, GPU, REGION, Stack, twin_stack, up, wait_for
from .checkpointing_job import JOB, complete_saves, log, running_pods, training_job
from .test_remediation_gate import REBOOT_VM, TIMINGS
from .test_remediation_nodes import instance_of

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-gate-key-0123456789abcdef"
NAMESPACE = "together-remediation-gate"
GATE = "gate"

PROGRAM = f"""\
import os

import pulumi

from together_clusters.components import RemediationGate, RemediationGateArgs, provider_for
from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster("gpu", ClusterArgs(cluster_name="gate", region={REGION!r}, gpu_type={GPU!r}, num_gpus=8,
                                     num_preemptible_gpus=16, nvidia_version_id={DRIVER!r},
                                     ready_timeout_minutes=5))
provider = provider_for(cluster)
RemediationGate({GATE!r}, RemediationGateArgs(
    cluster_id=cluster.id, modes=["reboot-vm"], image="registry.invalid/remediation-gate:1",
    api_key=pulumi.Output.secret(os.environ["TOGETHER_API_KEY"]), base_url=os.environ["TOGETHER_BASE_URL"],
    interval_seconds=1, drain_timeout_seconds=120),
    opts=pulumi.ResourceOptions(provider=provider))
pulumi.export("cluster_id", cluster.id)
pulumi.export("kube_config", cluster.kube_config)
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("gate")
    with twin_stack(tmp, "twin-gate", PROGRAM, API_KEY) as created:
        created.emulator.admin.settings(remediation_timings=TIMINGS)
        yield created


def allowed(api: client.ApiClient, verb: str, resource: str, subresource: str = "", group: str = "") -> bool:
    """Whether the API server's RBAC lets the gate's ServiceAccount do it (a SubjectAccessReview)."""
    review = client.AuthorizationV1Api(api).create_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{NAMESPACE}:{GATE}",
                "resourceAttributes": {
                    "verb": verb,
                    "resource": resource,
                    "subresource": subresource,
                    "group": group,
                    "namespace": "default",
                },
            },
        }
    )
    return bool(review.status.allowed)


def test_the_gate_runs_on_a_standard_node_with_the_least_it_needs_and_no_key_in_the_state(
    stack: Stack,
) -> None:
    api = up(stack)
    core = client.CoreV1Api(api)

    def gate_pod() -> Any:
        pods = core.list_namespaced_pod(NAMESPACE).items
        return next((p for p in pods if p.status.phase == "Running"), None)

    pod = wait_for(gate_pod, "the gate's pod to run")
    node = core.read_node(pod.spec.node_name)
    assert (node.metadata.labels or {}).get("together.ai/compute-class") != "preemptible"
    assert allowed(api, "create", "pods", "eviction")
    assert allowed(api, "patch", "nodes")
    assert allowed(api, "list", "pods")
    for verb, resource, group in (
        ("delete", "pods", ""),
        ("get", "secrets", ""),
        ("delete", "nodes", ""),
        ("update", "jobs", "batch"),
        ("create", "pods", ""),
    ):
        assert not allowed(api, verb, resource, group=group), (verb, resource)
    exported = _engine.run_pulumi(["stack", "export"], cwd=stack.project, env=stack.env, check=True).stdout
    assert API_KEY not in exported


def test_the_gate_approves_an_automated_reboot_only_once_the_training_step_has_checkpointed_and_moved(
    stack: Stack, tmp_path: Path
) -> None:
    api = up(stack)
    outputs = _engine.stack_outputs(stack.project, stack.env)
    cluster_id = str(outputs["cluster_id"])
    http = httpx.Client(
        base_url=stack.emulator.base_url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30
    )
    view = _View(cluster_id, http, client.CoreV1Api(api), client.BatchV1Api(api))
    checkpoints = tmp_path / "checkpoints"
    view.batch.create_namespaced_job("default", training_job(checkpoints))
    first = wait_for(lambda: (running_pods(view, "default") or [None])[0], "the training pod to run")
    wait_for(lambda: "saved step=" in log(view, "default", first.metadata.name) or None, "a periodic save")
    node = first.spec.node_name
    rem = stack.emulator.admin.raise_remediation(cluster_id, instance_of(view, node), mode=REBOOT_VM)  # type: ignore[arg-type]

    seen: dict[str, Any] = {}

    def watch() -> None:
        path = f"/v1/compute/clusters/{cluster_id}/instances/{rem['instance_id']}/remediations/{rem['id']}"
        deadline = time.monotonic() + 240
        while "state" not in seen and time.monotonic() < deadline:
            state = http.get(path).json()["state"]
            if state != "PENDING_APPROVAL":
                seen["saves"] = complete_saves(checkpoints)
                seen["old_pod_running"] = any(
                    p.metadata.uid == first.metadata.uid for p in running_pods(view, "default")
                )
                seen["state"] = state
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    watcher.join(250)
    assert "state" in seen, "the gate never approved"
    assert not seen["old_pod_running"]
    old_saves = [step for step, pod in seen["saves"].values() if pod == first.metadata.name]
    assert old_saves, seen["saves"]

    def resumed() -> tuple[str, int] | None:
        for pod in running_pods(view, "default"):
            if pod.metadata.uid != first.metadata.uid:
                for line in log(view, "default", pod.metadata.name).splitlines():
                    if "resumed step=" in line:
                        return pod.spec.node_name, int(line.split("resumed step=")[1].split()[0])
        return None

    where, step = wait_for(resumed, "the replacement to resume")
    assert where != node
    assert step == max(old_saves)
    view.batch.delete_namespaced_job(JOB, "default", propagation_policy="Background")


class _View:
    """What the shared helpers read of a cluster: its id, compute API client and Kubernetes clients."""

    def __init__(self, cluster_id: str, http: Any, core: client.CoreV1Api, batch: client.BatchV1Api) -> None:
        self.cluster_id = cluster_id
        self.http = http
        self.core = core
        self.batch = batch

    def get(self) -> dict[str, Any]:
        return dict(self.http.get(f"/v1/compute/clusters/{self.cluster_id}").json())


def test_a_gate_killed_halfway_leaves_the_node_cordoned_and_the_repair_pending_and_its_successor_finishes(
    stack: Stack, tmp_path: Path
) -> None:
    api = up(stack)
    cluster_id = str(_engine.stack_outputs(stack.project, stack.env)["cluster_id"])
    http = httpx.Client(
        base_url=stack.emulator.base_url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30
    )
    view = _View(cluster_id, http, client.CoreV1Api(api), client.BatchV1Api(api))
    namespace = "held"
    view.core.create_namespace({"metadata": {"name": namespace}})
    view.batch.create_namespaced_job(namespace, training_job(tmp_path / "checkpoints"))
    first = wait_for(lambda: (running_pods(view, namespace) or [None])[0], "the training pod to run")
    # A budget that refuses the eviction holds the drain half-way.
    policy = client.PolicyV1Api(api)
    policy.create_namespaced_pod_disruption_budget(
        namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "hold"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": JOB}}},
        },
    )
    wait_for(
        lambda: (
            policy.read_namespaced_pod_disruption_budget("hold", namespace).status.current_healthy == 1
            or None
        ),
        "the budget to count the pod",
    )
    node = first.spec.node_name
    rem = stack.emulator.admin.raise_remediation(cluster_id, instance_of(view, node), mode=REBOOT_VM)  # type: ignore[arg-type]
    path = f"/v1/compute/clusters/{cluster_id}/instances/{rem['instance_id']}/remediations/{rem['id']}"

    def annotated() -> bool | None:
        found = view.core.read_node(node)
        return (
            found.spec.unschedulable
            and REMEDIATION_GATE_ANNOTATION in (found.metadata.annotations or {})
            or None
        )

    wait_for(annotated, "the gate to cordon the node and record its plan")
    [gate_pod] = [
        p for p in view.core.list_namespaced_pod(NAMESPACE).items if p.metadata.deletion_timestamp is None
    ]
    view.core.delete_namespaced_pod(gate_pod.metadata.name, NAMESPACE, grace_period_seconds=0)

    def successor() -> Any:
        pods = view.core.list_namespaced_pod(NAMESPACE).items
        return next(
            (p for p in pods if p.metadata.uid != gate_pod.metadata.uid and p.status.phase == "Running"), None
        )

    wait_for(successor, "the Deployment's new gate pod")
    # Nothing moved while the gate was gone: the node cordoned, the repair pending, the pod still running.
    assert annotated()
    assert http.get(path).json()["state"] == "PENDING_APPROVAL"
    assert [p.metadata.uid for p in running_pods(view, namespace)] == [first.metadata.uid]

    policy.delete_namespaced_pod_disruption_budget("hold", namespace)
    seen: dict[str, Any] = {}

    def approved() -> bool | None:
        if http.get(path).json()["state"] == "PENDING_APPROVAL":
            return None
        seen["old_pod_running"] = any(
            p.metadata.uid == first.metadata.uid for p in running_pods(view, namespace)
        )
        return True

    wait_for(approved, "the successor to finish the drain and approve", timeout=180)
    assert not seen["old_pod_running"]
    wait_for(lambda: running_pods(view, namespace) or None, "the Job's replacement to run")
    view.core.delete_namespace(namespace)
