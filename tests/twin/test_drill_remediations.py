"""``together-clusters drill --remediation MODE`` on the twin (issue 32, part 3): every mode five times on
simulated pods, and once on the standard node, each workload surviving every time.

The drill asks the emulator's compute API for the remediation (as it would a real API), the twin plays it on
the Nodes, the drill watches. The emulator's clock runs at 600 for this module (a repair's states last a
fraction of a second, a new node's bring-up one) and is put back afterwards, with the remediation timings.

Oracles: the compute API (each remediation SUCCEEDED, none left active) and the cluster's own Kubernetes
API (the Deployment has every replica available again, none on a node that is gone or cordoned), read
independently of the drill's report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli import main as cli
from together_clusters.cli.drill.modes import EVICT_WITHOUT_REPLACEMENT, REMEDIATION_MODES
from together_clusters.emulator.server import RunningEmulator

from ._repairs import remediation_timings
from ._twin import COMPUTE_CLASS, TwinCluster, no_namespace_terminating, wait_for
from .test_drill import kubeconfig_file

pytestmark = pytest.mark.twin


@pytest.fixture(autouse=True)
def owns_its_nodes(cluster: TwinCluster) -> None:
    """These tests drain nodes: none starts while an earlier test's pods are still on the shared cluster."""
    no_namespace_terminating(cluster)


RUNS = 5
SPEED = 600
"""Emulated seconds per real second while this module runs (the package's is 60)."""
TIMINGS = {
    "pending_s": 30,
    "quarantining_s": 60,
    "quarantined_s": 30,
    "running_s": {mode: 120 for mode in REMEDIATION_MODES.values()},
}
REPLICAS = 2


@pytest.fixture(scope="module", autouse=True)
def fast_clock(twin_emulator: RunningEmulator) -> Iterator[None]:
    with remediation_timings(twin_emulator.admin, TIMINGS, speed=SPEED):
        yield


@pytest.fixture
def api_key(cluster: TwinCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The drill reads the compute API with TOGETHER_API_KEY: the key that owns the package's cluster."""
    monkeypatch.setenv("TOGETHER_API_KEY", str(cluster.http.headers["Authorization"]).removeprefix("Bearer "))
    monkeypatch.delenv("TOGETHER_BASE_URL", raising=False)


def serve(prefers: str | None = None, compute_class: str | None = "preemptible") -> dict[str, Any]:
    """A Deployment of simulated pods, small enough for any node (of ``compute_class``; ``None``: either),
    preferring ``prefers``'s nodes when given."""
    labels = {"app": "serve"}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 5,
        "tolerations": [{"key": COMPUTE_CLASS, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {"name": "main", "image": "registry.invalid/server:1", "resources": {"requests": {"cpu": "100m"}}}
        ],
    }
    if compute_class is not None:
        spec["nodeSelector"] = {COMPUTE_CLASS: compute_class}
    if prefers is not None:
        term = {"matchExpressions": [{"key": COMPUTE_CLASS, "operator": "In", "values": [prefers]}]}
        spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]
            }
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def settled(cluster: TwinCluster, namespace: str) -> list[client.V1Pod]:
    """Wait until the cluster has its node set and the Deployment its replicas Running, nothing
    terminating; those pods."""
    cluster.wait_for_nodes(standard=1, preemptible=2)

    def running() -> list[client.V1Pod] | None:
        pods = cluster.core.list_namespaced_pod(namespace).items
        up = [p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]
        return up if len(up) == len(pods) == REPLICAS else None

    return wait_for(running, f"{REPLICAS} pods of serve Running, none terminating", timeout=60)


def drill(cluster: TwinCluster, namespace: str, kubeconfig: str, mode: str, node: str, *extra: str) -> int:
    """One ``drill --remediation MODE`` of ``node`` through the emulator's compute API; its exit code."""
    return cli.main(
        [
            "drill",
            "--kubeconfig",
            kubeconfig,
            "--twin",
            cluster.emulator.base_url,
            "--remediation",
            mode,
            "--node",
            node,
            "-n",
            namespace,
            "--json",
            "--timeout",
            "60",
            "--log-wait",
            "0",
            *extra,
        ]
    )


def survived(
    cluster: TwinCluster, namespace: str, node: str, mode: str, capsys: pytest.CaptureFixture[str], code: int
) -> None:
    """The drill's report says the Deployment survived and the remediation succeeded; the APIs agree."""
    out = capsys.readouterr().out
    report = json.loads(out)
    assert code == 0 and report["ok"], out
    assert (report["mode"], report["node"], report["termination"]) == ("remediation", node, mode)
    rem = report["remediation"]
    assert rem["state"] == "SUCCEEDED" and rem["states"][-1] == "SUCCEEDED", rem
    [row] = report["workloads"]
    assert (row["kind"], row["name"], row["outcome"]) == ("Deployment", "serve", "survived"), row
    assert row["pods_lost"] >= 1 and row["seconds_to_replacement"] > 0
    # The compute API: that remediation succeeded, and the instance has none active.
    path = f"/v1/compute/clusters/{cluster.cluster_id}/instances/{rem['instance_id']}/remediations"
    assert cluster.http.get(f"{path}/{rem['id']}").json()["state"] == "SUCCEEDED"
    active = cluster.http.get(path, params={"state": "PENDING,QUARANTINING,QUARANTINED,RUNNING"}).json()
    assert active["remediations"] == [], active
    # Kubernetes: every replica available again (the Deployment controller's status trails its pods by a
    # moment), on a node that is there and schedulable.
    apps = client.AppsV1Api(cluster.api)
    wait_for(
        lambda: (
            apps.read_namespaced_deployment_status("serve", namespace).status.available_replicas == REPLICAS
        ),
        f"{REPLICAS} replicas of serve available",
        timeout=30,
    )
    schedulable = {n.metadata.name for n in cluster.nodes() if not n.spec.unschedulable}
    pods = cluster.core.list_namespaced_pod(namespace).items
    assert all(p.spec.node_name in schedulable for p in pods if p.metadata.deletion_timestamp is None)


@pytest.mark.parametrize("mode", list(REMEDIATION_MODES))
def test_a_deployment_survives_five_remediations_of_its_node(
    cluster: TwinCluster,
    namespace: str,
    api_key: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    mode: str,
) -> None:
    kubeconfig = kubeconfig_file(cluster, tmp_path)
    client.AppsV1Api(cluster.api).create_namespaced_deployment(namespace, serve())
    for _ in range(RUNS):
        victim = settled(cluster, namespace)[0].spec.node_name
        # No --cluster-id: on the twin the drill asks the emulator which cluster the node is in.
        code = drill(cluster, namespace, kubeconfig, mode, victim)
        if REMEDIATION_MODES[mode] == EVICT_WITHOUT_REPLACEMENT:
            # The eviction lowered the cluster's count: order the node back for the next run.
            assert cluster.get()["desired_preemptible_gpus"] == 8
            cluster.update(num_preemptible_gpus=16)
        survived(cluster, namespace, victim, mode, capsys, code)
    settled(cluster, namespace)


def test_a_deployment_survives_a_remediation_of_the_standard_node(
    cluster: TwinCluster, namespace: str, api_key: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    apps = client.AppsV1Api(cluster.api)
    apps.create_namespaced_deployment(namespace, serve(prefers="standard", compute_class=None))
    standard = next(name for name, cls in cluster.node_classes().items() if cls == "standard")
    wait_for(
        lambda: any(p.spec.node_name == standard for p in settled(cluster, namespace)),
        "a pod of serve on the standard node",
    )
    kubeconfig = kubeconfig_file(cluster, tmp_path)
    code = drill(cluster, namespace, kubeconfig, "reboot-vm", standard, "--cluster-id", cluster.cluster_id)
    survived(cluster, namespace, standard, "reboot-vm", capsys, code)
    assert cluster.node_classes()[standard] == "standard"
    settled(cluster, namespace)


def test_a_dry_run_asks_for_no_remediation(
    cluster: TwinCluster, namespace: str, api_key: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client.AppsV1Api(cluster.api).create_namespaced_deployment(namespace, serve())
    victim = settled(cluster, namespace)[0].spec.node_name
    before = len(cluster.emulator.admin.remediations())
    code = drill(cluster, namespace, kubeconfig_file(cluster, tmp_path), "vm-only", victim, "--dry-run")
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"node:     {victim}" in out and "manual vm-only remediation of instance" in out
    assert f"{namespace}/serve-" in out
    assert len(cluster.emulator.admin.remediations()) == before
    assert not cluster.core.read_node(victim).spec.unschedulable
