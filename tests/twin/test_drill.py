"""``together-clusters drill`` against the twin's real controllers, in its twin and its game-day modes.

Oracles: the Kubernetes API read with the ``kubernetes`` client (the node, its Events, the Job's conditions),
independently of what the command reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli import main as cli
from together_clusters.cli.exit_codes import ExitCode

from ._twin import TwinCluster, wait_for
from .test_twin import job_manifest

pytestmark = pytest.mark.twin


def deployment_manifest(name: str, node: str) -> dict[str, Any]:
    """Two replicas preferring the victim; a replacement may go to any preemptible node."""
    job = job_manifest(name, node)["spec"]["template"]
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": {**job["spec"], "restartPolicy": "Always"}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
    }


def create_deployment(cluster: TwinCluster, namespace: str, manifest: dict[str, Any]) -> None:
    client.AppsV1Api(cluster.api).create_namespaced_deployment(namespace, manifest)


def kubeconfig_file(cluster: TwinCluster, tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(cluster.kubeconfig)
    return str(path)


def on_victim(cluster: TwinCluster, namespace: str, victim: str, count: int) -> None:
    def placed() -> bool:
        # Only this test's pods: an earlier test's namespace may still be going away.
        pods = cluster.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={victim}").items
        mine = [p for p in pods if p.status.phase == "Running" and p.metadata.namespace == namespace]
        return len(mine) == count == len(pods)

    wait_for(placed, f"only this test's {count} pods running on {victim}")


def on_next_victim(
    cluster: TwinCluster, namespace: str, jobs: tuple[str, ...] = (), deployments: tuple[str, ...] = ()
) -> str:
    """The preemptible node the platform reclaims next, once this test's ``jobs`` and ``deployments`` (one pod
    each, preferring it) run there, and nothing else does."""
    victim = cluster.next_victim()
    for name in jobs:
        cluster.batch.create_namespaced_job(namespace, job_manifest(name, victim))
    for name in deployments:
        create_deployment(cluster, namespace, deployment_manifest(name, victim))
    on_victim(cluster, namespace, victim, len(jobs) + len(deployments))
    return victim


def given_back(cluster: TwinCluster, victim: str) -> None:
    """Wait for the preempted ``victim`` to be deleted and the pool to be whole again."""
    wait_for(lambda: victim not in cluster.node_classes(), "the preempted node to be deleted")
    cluster.wait_for_nodes(standard=1, preemptible=2)


def drill(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(["drill", *argv])
    return code, capsys.readouterr().out


def test_twin_mode_reports_each_workload_surviving_an_eviction(
    cluster: TwinCluster, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = on_next_victim(cluster, namespace, jobs=("train",), deployments=("serve",))

    url = cluster.emulator.base_url
    code, out = drill(
        capsys,
        "--kubeconfig",
        kubeconfig_file(cluster, tmp_path),
        "--twin",
        url,
        "--json",
        "--timeout",
        "120",
        "--log-wait",
        "2",  # kwok's simulated pods never serve a log: the drill tries for this long, then says so
    )

    report = json.loads(out)
    assert code == 0 and report["ok"], out
    assert (report["mode"], report["node"], report["termination"]) == ("twin", victim, "eviction")
    rows = {(w["kind"], w["name"]): w for w in report["workloads"]}
    assert set(rows) == {("Job", "train"), ("Deployment", "serve")}
    for row in rows.values():
        assert row["outcome"] == "survived" and row["pods_lost"] == 1
        assert row["seconds_to_replacement"] > 0
        # kwok's simulated pods have no log: the step stays unknown and the report says why.
        assert row["resumed"] is None and "no pod log" in row["detail"]
    # The controllers agree: the Job never failed, a replacement runs elsewhere, the node went at T+grace.
    status = cluster.batch.read_namespaced_job_status("train", namespace).status
    assert not status.failed and not any(c.type == "Failed" for c in status.conditions or [])
    pods = cluster.core.list_namespaced_pod(namespace).items
    assert all(p.spec.node_name != victim for p in pods if p.status.phase == "Running")
    given_back(cluster, victim)


def test_twin_mode_exits_non_zero_when_a_sigterm_exit_burns_the_backoff_limit(
    cluster: TwinCluster, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No Ignore rule for exit 143: a SIGTERM without a disruption condition counts against backoffLimit 0.
    victim = on_next_victim(cluster, namespace, jobs=("fragile",))

    url = cluster.emulator.base_url
    kubeconfig = kubeconfig_file(cluster, tmp_path)
    code, out = drill(
        capsys, "--kubeconfig", kubeconfig, "--twin", url, "--termination", "signal", "--timeout", "120"
    )

    assert code == ExitCode.NOT_SURVIVED, out
    assert "Job/fragile" in out and "failed" in out and "BackoffLimitExceeded" in out
    assert "a workload did not survive" in out
    status = cluster.batch.read_namespaced_job_status("fragile", namespace).status
    assert any(c.type == "Failed" and c.reason == "BackoffLimitExceeded" for c in status.conditions)
    given_back(cluster, victim)


def test_game_day_cordons_announces_evicts_and_gives_the_node_back(
    cluster: TwinCluster, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = on_next_victim(cluster, namespace, deployments=("serve",))
    [before] = cluster.core.list_namespaced_pod(namespace).items

    code, out = drill(
        capsys,
        "--kubeconfig",
        kubeconfig_file(cluster, tmp_path),
        "--node",
        victim,
        "--yes",
        "--json",
        "--timeout",
        "120",
        "--log-wait",
        "2",
    )

    report = json.loads(out)
    assert code == 0 and report["mode"] == "game-day" and report["node"] == victim, out
    [row] = report["workloads"]
    assert (row["kind"], row["name"], row["outcome"]) == ("Deployment", "serve", "survived")
    # The node stays (uncordoned, unmarked) and carries the preemption Event; the old pod was evicted.
    node = cluster.core.read_node(victim)
    assert not node.spec.unschedulable
    assert "together.ai/preempted-at" not in (node.metadata.annotations or {})
    events = cluster.core.list_event_for_all_namespaces(field_selector=f"involvedObject.name={victim}").items
    assert any(e.reason == "TogetherPreemptionNotified" and e.type == "Warning" for e in events)
    pods = cluster.core.list_namespaced_pod(namespace).items
    assert before.metadata.uid not in {p.metadata.uid for p in pods if p.metadata.deletion_timestamp is None}
    assert cluster.node_classes()[victim] == "preemptible"


def test_an_unknown_node_is_refused_naming_the_choices(
    cluster: TwinCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["drill", "--kubeconfig", kubeconfig_file(cluster, tmp_path), "--node", "no-such-node"])
    err = capsys.readouterr().err
    assert code == 1
    assert "--node no-such-node is not a schedulable preemptible node" in err
    assert cluster.next_victim() in err


def test_game_day_refuses_when_no_other_node_could_take_the_pods_and_changes_nothing(
    cluster: TwinCluster, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The other preemptible node cordoned, the standard one not of the pod's class: the drill refuses at
    once, naming each node's reason, instead of cordoning the victim and waiting out its timeout."""
    victim = on_next_victim(cluster, namespace, deployments=("lonely",))
    others = [n for n, c in cluster.node_classes().items() if c == "preemptible" and n != victim]
    for name in others:
        cluster.core.patch_node(name, {"spec": {"unschedulable": True}})
    try:
        code = cli.main(
            ["drill", "--kubeconfig", kubeconfig_file(cluster, tmp_path), "--node", victim, "--yes"]
        )
        err = capsys.readouterr().err
    finally:
        for name in others:
            cluster.core.patch_node(name, {"spec": {"unschedulable": None}})
    assert code == 1
    [line] = err.splitlines()
    assert f"refusing to drill {victim}: no other node could take pod {namespace}/lonely-" in line, line
    assert all(f"{name}: cordoned" in line for name in others), line
    node = cluster.core.read_node(victim)
    assert not node.spec.unschedulable and "together.ai/preempted-at" not in (node.metadata.annotations or {})
