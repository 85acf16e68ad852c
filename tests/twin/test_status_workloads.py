"""``together-clusters status`` reads the workloads of the twin's cluster from its own Kubernetes API: a
workload the scheduler cannot place is reported stalled (and fails the command with --fail-on-stalled), and
a PREEMPTIBLE_FIRST workload's GPU-hours are split by the class of the nodes its pods ran on. A node repair
(remediation) is shown on its Node with the workloads whose pods run there, and its Node Events are what
the timeline marks.

The real CLI in a subprocess, on a stack whose state (imported, no ``up``) holds the shared twin cluster.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests import _engine
from together_clusters.cli import kube_view
from together_clusters.cli.exit_codes import ExitCode
from together_clusters.cli.status.timeline import repair_moments
from together_clusters.platform import (
    COMPUTE_CLASS_LABEL,
    PLACEMENT_LABEL,
    PREEMPTIBLE,
    ComputeClass,
    RemediationReason,
    kubernetes_node_name,
)

from ._twin import TwinCluster, together_clusters_status, wait_for

pytestmark = pytest.mark.twin

PROJECT = "twin-status"
STACK_URN = f"urn:pulumi:test::{PROJECT}::pulumi:pulumi:Stack::{PROJECT}-test"
PROVIDER_URN = f"urn:pulumi:test::{PROJECT}::pulumi:providers:pulumi-python::default"
PRICE = 4.0


def component_pod(
    name: str, component: str, placement: ComputeClass, gpus: int, node: str | None
) -> dict[str, Any]:
    """A pod labelled as a component labels its pods, asking for ``gpus``, on ``node`` (else anywhere)."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,  # gone with the namespace at once: the next test has the nodes
        "tolerations": [
            {"key": COMPUTE_CLASS_LABEL, "operator": "Equal", "value": PREEMPTIBLE, "effect": "NoSchedule"}
        ],
        "containers": [
            {
                "name": "main",
                "image": "registry.invalid/trainer:1",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    labels = {
        "app.kubernetes.io/name": component,
        "app.kubernetes.io/component": "trial",
        PLACEMENT_LABEL: placement,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def stack_of(cluster: TwinCluster, tmp: Path) -> tuple[Path, dict[str, str]]:
    """A project whose stack ``test`` holds the twin cluster as its Cluster resource ``twin``."""
    _engine.require_engine()
    project = _engine.write_project(tmp / "prog", PROJECT, "import pulumi\n")
    env = _engine.engine_env(
        tmp,
        pythonpath=[_engine.ROOT],
        extra={"TOGETHER_BASE_URL": cluster.emulator.base_url, "TOGETHER_API_KEY": "twin-twin"},
    )
    resources = [
        {"urn": STACK_URN, "custom": False, "type": "pulumi:pulumi:Stack"},
        {"urn": PROVIDER_URN, "custom": True, "id": "provider", "type": "pulumi:providers:pulumi-python"},
        {
            "urn": f"urn:pulumi:test::{PROJECT}::pulumi-python:dynamic/together_clusters:Cluster::twin",
            "custom": True,
            "id": cluster.cluster_id,
            "type": "pulumi-python:dynamic/together_clusters:Cluster",
            "parent": STACK_URN,
            "provider": f"{PROVIDER_URN}::provider",
        },
    ]
    state = tmp / "state.json"
    state.write_text(json.dumps({"version": 3, "deployment": {"manifest": {}, "resources": resources}}))
    _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env, check=True)
    _engine.run_pulumi(["stack", "import", "--file", str(state)], cwd=project, env=env, check=True)
    return project, env


def started(cluster: TwinCluster, namespace: str, name: str) -> Any:
    pod = cluster.core.read_namespaced_pod(name, namespace)
    statuses = pod.status.container_statuses or []
    return pod if statuses and statuses[0].state.running is not None else None


def unschedulable(cluster: TwinCluster, namespace: str, name: str) -> Any:
    conditions = cluster.core.read_namespaced_pod(name, namespace).status.conditions or []
    return next((c for c in conditions if c.type == "PodScheduled" and c.reason == "Unschedulable"), None)


def test_status_reports_the_stalled_workload_fails_on_it_on_request_and_splits_gpu_hours_by_node_class(
    cluster: TwinCluster, namespace: str, tmp_path: Path
) -> None:
    by_class = {cls: name for name, cls in cluster.node_classes().items()}
    first = ComputeClass.PREEMPTIBLE_FIRST
    for pod in (
        component_pod("on-standard", "sweep", first, 1, by_class[ComputeClass.STANDARD]),
        component_pod("on-preemptible", "sweep", first, 1, by_class[ComputeClass.PREEMPTIBLE]),
        component_pod("too-big", "eval", ComputeClass.PREEMPTIBLE, 64, None),  # no node has 64 GPUs
    ):
        cluster.core.create_namespaced_pod(namespace, pod)
    project, env = stack_of(cluster, tmp_path)
    wait_for(lambda: started(cluster, namespace, "on-standard"), "the pod on the standard node to run")
    wait_for(lambda: started(cluster, namespace, "on-preemptible"), "the pod on the preemptible node to run")
    waiting = wait_for(
        lambda: unschedulable(cluster, namespace, "too-big"), "the scheduler to give up on too-big"
    )

    failing = together_clusters_status(
        project, env, "--json", "--price-per-gpu-hour", str(PRICE), "--fail-on-stalled"
    )
    shown = together_clusters_status(project, env)

    assert failing.returncode == ExitCode.STALLED, _engine.output(failing)
    [twin] = json.loads(failing.stdout)["clusters"]
    report = twin["workloads"]
    assert report["unread"] is None
    [stalled] = [s for s in report["stalled"] if s["workload"].startswith(f"{namespace}/")]
    assert (stalled["workload"], stalled["waiting"], stalled["source"]) == (
        f"{namespace}/eval",
        1,
        "scheduler",
    )
    assert "Insufficient nvidia.com/gpu" in stalled["waiting_for"]
    [sweep] = [h for h in report["hours"] if h["workload"] == f"{namespace}/sweep"]
    assert sweep["placement"] == first
    assert sweep["standard_gpu_hours"] > 0 and sweep["preemptible_gpu_hours"] > 0
    assert sweep["fallback_cost"] == pytest.approx(sweep["standard_gpu_hours"] * PRICE * 0.5)
    assert sweep["moving_back_saved"] == pytest.approx(sweep["preemptible_gpu_hours"] * PRICE * 0.5)

    assert shown.returncode == 0, _engine.output(shown)  # information only, without the flag
    since = waiting.last_transition_time.isoformat()
    line = f"stalled for capacity: {namespace}/eval on twin: 1 pod Pending since "
    assert any(
        row.startswith(line) and "Insufficient nvidia.com/gpu" in row for row in shown.stdout.splitlines()
    ), shown.stdout
    assert since[:19] in shown.stdout


def remediation_state(cluster: TwinCluster, instance_id: str, remediation_id: str) -> str:
    path = f"/v1/compute/clusters/{cluster.cluster_id}/instances/{instance_id}/remediations/{remediation_id}"
    reply = cluster.http.get(path)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["state"])


def repair_events_of(cluster: TwinCluster, node: str) -> dict[str, Any] | None:
    """The cluster's view as ``status`` reads it, once it holds the Events of a repair run on ``node``."""
    view = kube_view.read(cluster.kubeconfig)
    reasons = {e["reason"] for e in view.get("node_events") or [] if e["involvedObject"]["name"] == node}
    return view if {RemediationReason.STARTED, RemediationReason.SUCCEEDED} <= reasons else None


def test_status_shows_a_repair_on_the_node_of_a_workload_and_reads_its_node_events_for_the_timeline(
    cluster: TwinCluster, namespace: str, tmp_path: Path
) -> None:
    node = next(name for name, cls in cluster.node_classes().items() if cls == ComputeClass.STANDARD)
    pod = component_pod("under-repair", "trainer", ComputeClass.STANDARD, 1, node)
    cluster.core.create_namespaced_pod(namespace, pod)
    wait_for(lambda: started(cluster, namespace, "under-repair"), "the pod on the node to repair to run")
    [worker] = [n for n in cluster.get()["gpu_worker_nodes"] if kubernetes_node_name(n["host_name"]) == node]
    raised = cluster.emulator.admin.raise_remediation(
        cluster.cluster_id, worker["instance_id"], mode="REMEDIATION_MODE_REBOOT_VM"
    )
    project, env = stack_of(cluster, tmp_path)

    waiting = together_clusters_status(project, env, "--json")
    text = together_clusters_status(project, env)

    assert waiting.returncode == 0, _engine.output(waiting)
    [twin] = json.loads(waiting.stdout)["clusters"]
    [row] = [r for r in twin["repairs"]["active"] if r["remediation_id"] == raised["id"]]
    assert (row["node"], row["mode"], row["state"], row["trigger"]) == (
        node,
        "reboot-vm",
        "PENDING_APPROVAL",
        "AUTOMATED",
    )
    assert f"{namespace}/trainer" in row["workloads"]
    [line] = [line for line in text.stdout.splitlines() if raised["id"] in line]
    assert line.split()[:4] == [node, raised["id"], "reboot-vm", "PENDING_APPROVAL"]
    assert f"{namespace}/trainer" in line

    approved = cluster.http.post(
        f"/v1/compute/clusters/{cluster.cluster_id}/instances/{worker['instance_id']}"
        f"/remediations/{raised['id']}/approve",
        json={},
    )
    assert approved.status_code == 200, approved.text
    wait_for(
        lambda: remediation_state(cluster, worker["instance_id"], raised["id"]) == "SUCCEEDED" or None,
        "the reboot to succeed",
    )
    png = tmp_path / "repairs.png"
    view = wait_for(lambda: repair_events_of(cluster, node), "the repair's Node Events")
    after = together_clusters_status(project, env, "--json", "--png", str(png))

    far = datetime.now(UTC) + timedelta(days=1)  # the platform's clock runs ahead of ours
    assert len(repair_moments(view, far - timedelta(days=2), far)) >= 2
    assert after.returncode == 0, _engine.output(after)
    [twin] = json.loads(after.stdout)["clusters"]
    assert raised["id"] not in [r["remediation_id"] for r in twin["repairs"]["active"]]
    [ended] = [r for r in twin["repairs"]["recently_ended"] if r["remediation_id"] == raised["id"]]
    assert (ended["node"], ended["state"]) == (node, "SUCCEEDED")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
