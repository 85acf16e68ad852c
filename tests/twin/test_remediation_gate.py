"""The remediation gate on the twin (issue 32, part 4): ``together-clusters remediations`` as a user runs it,
against the emulator's compute API and the twin's Kubernetes API.

A real training loop on the checkpoint runtime (tests/twin/workloads/train_loop.py, a local process) runs as
a Job's pod on a preemptible node; the platform raises an automated ``REBOOT_VM`` remediation of that node
(the harshest mode: the reboot kills every pod at once, so a checkpoint write it cuts is lost).

Oracles independent of the gate: the compute API's remediation state, polled from a thread of the test's
own, and the checkpoint folder on disk, read the moment the approval is seen (the evicted pod's SIGTERM
save must already be complete then); the Job's replacement pod's own log (it resumed from that save).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from together_clusters.emulator.server import RunningEmulator
from together_clusters.platform import REMEDIATION_GATE_ANNOTATION

from ._repairs import remediation_timings
from ._twin import TwinCluster, no_namespace_terminating, wait_for
from .checkpointing_job import JOB, complete_saves, log, running_pods, training_job
from .test_remediation_nodes import instance_of

pytestmark = pytest.mark.twin


@pytest.fixture(autouse=True)
def owns_its_nodes(cluster: TwinCluster) -> None:
    """These tests drain nodes: none starts while an earlier test's pods are still on the shared cluster."""
    no_namespace_terminating(cluster)


REBOOT_VM = "REMEDIATION_MODE_REBOOT_VM"
TIMINGS = {"pending_s": 30, "quarantining_s": 30, "quarantined_s": 30, "running_s": {REBOOT_VM: 120}}


@pytest.fixture(scope="module", autouse=True)
def timings(twin_emulator: RunningEmulator) -> Iterator[None]:
    with remediation_timings(twin_emulator.admin, TIMINGS):
        yield


@pytest.fixture(autouse=True)
def cancelled_after(cluster: TwinCluster) -> Iterator[None]:
    """The package's twin cluster is shared: a remediation a test left awaiting approval (it failed before
    approving) would hold its node (one active remediation per instance: the next test's is a 409), and the
    gate's cordon would stay. Cancel what is still cancellable; a ``list`` pass then lifts the cordon."""
    yield
    every = f"/v1/compute/clusters/{cluster.cluster_id}/instances/-/remediations"
    for state in ("PENDING_APPROVAL", "PENDING"):
        page = cluster.http.get(every, params={"state": state, "page_size": 100}).json()
        for rem in page["remediations"]:
            cluster.http.post(
                f"/v1/compute/clusters/{cluster.cluster_id}/instances/{rem['instance_id']}"
                f"/remediations/{rem['id']}/cancel"
            )
    gate(cluster, "list")


def gate(
    cluster: TwinCluster, *args: str, timeout: float = 180, base_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``together-clusters remediations ARGS`` as a user runs it (``base_url``: another way to the API, such as
    a misbehaving proxy)."""
    key = str(cluster.http.headers["Authorization"]).removeprefix("Bearer ")
    kubeconfig = Path(os.environ.get("PYTEST_TMP", "/tmp")) / f"gate-{cluster.cluster_id}.yaml"
    kubeconfig.write_text(cluster.kubeconfig)
    env = {
        **os.environ,
        "TOGETHER_API_KEY": key,
        "TOGETHER_BASE_URL": base_url or cluster.emulator.base_url,
        "KUBECONFIG": str(kubeconfig),
        "TOGETHER_CLUSTER_ID": cluster.cluster_id,
    }
    return subprocess.run(
        [sys.executable, "-m", "together_clusters.cli", "remediations", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def remediation(cluster: TwinCluster, rem: dict[str, Any]) -> dict[str, Any]:
    path = (
        f"/v1/compute/clusters/{cluster.cluster_id}/instances/{rem['instance_id']}/remediations/{rem['id']}"
    )
    return dict(cluster.http.get(path).json())


def cordoned(cluster: TwinCluster, node: str) -> bool:
    return bool(cluster.core.read_node(node).spec.unschedulable)


def test_the_gate_approves_a_reboot_only_after_the_training_step_has_checkpointed_and_a_dry_run_changes_nothing(
    cluster: TwinCluster, twin_emulator: RunningEmulator, namespace: str, tmp_path: Path
) -> None:
    checkpoints = tmp_path / "checkpoints"
    cluster.batch.create_namespaced_job(namespace, training_job(checkpoints))
    first = wait_for(lambda: (running_pods(cluster, namespace) or [None])[0], "the training pod to run")
    wait_for(lambda: "saved step=" in log(cluster, namespace, first.metadata.name) or None, "a periodic save")
    node = first.spec.node_name
    rem = twin_emulator.admin.raise_remediation(
        cluster.cluster_id, instance_of(cluster, node), mode=REBOOT_VM
    )
    assert rem["state"] == "PENDING_APPROVAL"

    # --dry-run: the plan, nothing changed.
    dry = gate(cluster, "approve", rem["id"], "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["drain"]["node"] == node
    # The cluster is shared: other tests' pods (their namespaces still being deleted) may be on the node too,
    # and the drain evicts them as well. This test's own namespace has its one pod there.
    evict = plan["drain"]["evict"]
    assert [p for p in evict if p["pod"].startswith(f"{namespace}/")] == [
        {
            "pod": f"{namespace}/{first.metadata.name}",
            "workload": f"Job/{namespace}/{JOB}",
            "checkpointing": True,
        }
    ]
    assert not cordoned(cluster, node)
    assert remediation(cluster, rem)["state"] == "PENDING_APPROVAL"
    assert [p.metadata.uid for p in running_pods(cluster, namespace)] == [first.metadata.uid]

    # list: the remediation, its node, the workload on it and its last checkpoint.
    listed = gate(cluster, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = [r for r in json.loads(listed.stdout)["remediations"] if r["id"] == rem["id"]]
    assert row["node"] == node and row["state"] == "PENDING_APPROVAL" and row["mode"] == "reboot-vm"
    (work,) = [w for w in row["workloads"] if w["workload"].startswith(f"Job/{namespace}/")]
    assert work["workload"] == f"Job/{namespace}/{JOB}" and work["checkpointing"] is True
    assert work["last_checkpoint"] is not None and work["last_checkpoint"]["step"] >= 20

    # approve: watched from a thread of the test's own, the checkpoint folder read the moment it is seen.
    seen: dict[str, Any] = {}

    def watch() -> None:
        while "state" not in seen:
            state = remediation(cluster, rem)["state"]
            if state != "PENDING_APPROVAL":
                seen["saves"] = complete_saves(checkpoints)
                seen["old_pod_running"] = any(
                    p.metadata.uid == first.metadata.uid for p in running_pods(cluster, namespace)
                )
                seen["state"] = state
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    approved = gate(cluster, "approve", rem["id"], "--timeout", "120")
    assert approved.returncode == 0, approved.stderr
    watcher.join(30)
    assert "state" in seen
    assert not seen["old_pod_running"]
    # The evicted pod's last save (the one its SIGTERM handler wrote) was complete when the approval was seen.
    old_saves = [step for step, pod in seen["saves"].values() if pod == first.metadata.name]
    assert old_saves, seen["saves"]
    sigterm_step = max(old_saves)

    # The replacement resumed from the evicted pod's last save, on another node.
    def resumed() -> tuple[str, int] | None:
        for pod in running_pods(cluster, namespace):
            if pod.metadata.uid != first.metadata.uid:
                text = log(cluster, namespace, pod.metadata.name)
                for line in text.splitlines():
                    if "resumed step=" in line:
                        return pod.spec.node_name, int(line.split("resumed step=")[1].split()[0])
        return None

    where, step = wait_for(resumed, "the replacement to resume")
    assert where != node
    assert step == sigterm_step
    # The reboot ends; the gate's cordon is lifted by the next pass (list).
    wait_for(
        lambda: remediation(cluster, rem)["state"] == "SUCCEEDED" or None, "the reboot to end", timeout=60
    )
    assert gate(cluster, "list").returncode == 0
    annotations = cluster.core.read_node(node).metadata.annotations or {}
    assert REMEDIATION_GATE_ANNOTATION not in annotations
    assert not cordoned(cluster, node)


def test_a_drain_a_budget_holds_is_not_approved_and_a_second_run_finishes_it(
    cluster: TwinCluster, twin_emulator: RunningEmulator, namespace: str, tmp_path: Path
) -> None:
    cluster.batch.create_namespaced_job(namespace, training_job(tmp_path / "checkpoints"))
    first = wait_for(lambda: (running_pods(cluster, namespace) or [None])[0], "the training pod to run")
    node = first.spec.node_name
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "hold"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": JOB}}},
    }
    from kubernetes import client

    policy = client.PolicyV1Api(cluster.api)
    policy.create_namespaced_pod_disruption_budget(namespace, budget)
    wait_for(
        lambda: (
            policy.read_namespaced_pod_disruption_budget("hold", namespace).status.current_healthy == 1
            or None
        ),
        "the budget to count the pod",
    )
    rem = twin_emulator.admin.raise_remediation(
        cluster.cluster_id, instance_of(cluster, node), mode=REBOOT_VM
    )

    held = gate(cluster, "approve", rem["id"], "--timeout", "3")
    assert held.returncode == 6, held.stderr
    assert "PodDisruptionBudget" in held.stderr and "stays cordoned" in held.stderr
    assert "\n" not in held.stderr.strip().split("error: ", 1)[1]
    assert cordoned(cluster, node)
    assert remediation(cluster, rem)["state"] == "PENDING_APPROVAL"
    assert [p.metadata.uid for p in running_pods(cluster, namespace)] == [first.metadata.uid]

    # The budget lifted, a second run (as after a gate that died) finishes the drain it recorded.
    policy.delete_namespaced_pod_disruption_budget("hold", namespace)
    done = gate(cluster, "approve", rem["id"], "--timeout", "120", "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["approved"] is True
    assert outcome["moved"][f"Job/{namespace}/{JOB}"].startswith(("running on", "queued"))
    # The reboot ends; the next pass (list) lifts the gate's cordon: the shared cluster keeps its nodes.
    wait_for(lambda: remediation(cluster, rem)["state"] == "SUCCEEDED" or None, "the reboot to end", timeout=60)
    assert gate(cluster, "list").returncode == 0
    assert not cordoned(cluster, node)


def test_reject_needs_a_comment_and_a_remediation_not_awaiting_approval_is_refused(
    cluster: TwinCluster, twin_emulator: RunningEmulator
) -> None:
    node = max(n for n, c in cluster.node_classes().items() if c == "preemptible")
    rem = twin_emulator.admin.raise_remediation(
        cluster.cluster_id, instance_of(cluster, node), mode=REBOOT_VM
    )
    missing = gate(cluster, "reject", rem["id"])
    assert missing.returncode == 1 and "--comment" in missing.stderr
    rejected = gate(cluster, "reject", rem["id"], "--comment", "not now")
    assert rejected.returncode == 0, rejected.stderr
    assert remediation(cluster, rem)["state"] == "CANCELLED"
    again = gate(cluster, "approve", rem["id"])
    assert again.returncode == 1
    assert "CANCELLED, not PENDING_APPROVAL" in again.stderr
    unknown = gate(cluster, "approve", "rem-does-not-exist")
    assert unknown.returncode == 1 and "remediations list" in unknown.stderr
    assert not cordoned(cluster, node)
