"""The Kubernetes twin against real Kubernetes controllers: the kubeconfig, the node set, the preemption drill.

Oracles: the Python ``kubernetes`` client and the built ``kubectl`` reading the cluster's own kubeconfig from
the compute API; the API server's watch (its revisions order every change); the real Job controller.
"""

from __future__ import annotations

import base64
import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import urllib3
from kubernetes import client

from together_clusters.emulator.kubernetes import binaries
from together_clusters.emulator.kubernetes.controlplane import AUDIT_LOG_FILE
from together_clusters.emulator.kubernetes.kwok_config import EXIT_CODE, RUN_DURATION, TERMINATION_DURATION
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.emulator.server import start_emulator

from ._twin import COMPUTE_CLASS, Recorder, TwinCluster, alive, wait_for

pytestmark = pytest.mark.twin


def _plane(emulator_url: str, cluster_id: str) -> dict[str, Any]:
    """The twin's status of one cluster's control plane (its PIDs, data and audit log paths)."""
    status = httpx.get(f"{emulator_url}/_emulator/kubernetes", timeout=30).json()
    (plane,) = [p for p in status["control_planes"] if p["cluster_id"] == cluster_id]
    return dict(plane)


PREEMPTIBLE_TOLERATION = {
    "key": COMPUTE_CLASS,
    "operator": "Equal",
    "value": "preemptible",
    "effect": "NoSchedule",
}


def pod_manifest(name: str, node: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 300,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [PREEMPTIBLE_TOLERATION],
            "containers": [{"name": "main", "image": "registry.invalid/trainer:1"}],
        },
    }


def running(cluster: TwinCluster, namespace: str, name: str) -> Any:
    pod = cluster.core.read_namespaced_pod(name, namespace)
    return pod if pod.status.phase == "Running" else None


def conditions(pod: Any) -> dict[str, Any]:
    return {c.type: c for c in pod.status.conditions or []}


def exit_codes(pod: Any) -> list[int | None]:
    return [
        s.state.terminated.exit_code if s.state.terminated else None
        for s in pod.status.container_statuses or []
    ]


def test_the_kubeconfig_from_the_api_reaches_the_clusters_own_control_plane(cluster: TwinCluster) -> None:
    reply = cluster.get()
    assert base64.b64decode(reply["kube_config"]).decode() == cluster.kubeconfig  # base64 on the wire
    assert "insecure-skip-tls-verify" not in cluster.kubeconfig  # verified against the cluster's own CA
    version = client.VersionApi(cluster.api).get_code()
    assert version.git_version.startswith("v1.")
    ready = {n["node_id"] for n in reply["gpu_worker_nodes"] if n["status"] == "Ready"}
    classes = cluster.node_classes()
    assert set(classes) == ready
    assert sorted(classes.values()) == ["preemptible", "preemptible", "standard"]


def test_nodes_carry_the_platforms_labels_capacity_and_taint(cluster: TwinCluster) -> None:
    for node in cluster.nodes():
        labels = node.metadata.labels
        assert labels["nvidia.com/gpu.product"] == "H100_SXM"
        assert node.status.capacity["nvidia.com/gpu"] == "8"
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        taints = [(t.key, t.value, t.effect) for t in node.spec.taints or []]
        if labels[COMPUTE_CLASS] == "preemptible":
            assert taints == [(COMPUTE_CLASS, "preemptible", "NoSchedule")]
        else:
            assert taints == []


def test_kubectl_lists_the_nodes_with_their_compute_class(cluster: TwinCluster, tmp_path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(cluster.kubeconfig)
    kubectl = binaries.require().kubectl
    shown = subprocess.run(
        [str(kubectl), "--kubeconfig", str(kubeconfig), "get", "nodes", "-L", COMPUTE_CLASS, "--no-headers"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    rows = {line.split()[0]: line.split()[-1] for line in shown.splitlines()}
    assert rows == cluster.node_classes()
    assert all(" Ready " in f" {line} " for line in shown.splitlines())


def test_nodes_follow_scale_up_and_scale_down(cluster: TwinCluster) -> None:
    before = set(cluster.node_classes())
    cluster.update(num_gpus=16, num_preemptible_gpus=24)
    cluster.wait_for_nodes(standard=2, preemptible=3)
    grown = cluster.node_classes()
    assert before < set(grown)
    cluster.update(num_gpus=8, num_preemptible_gpus=16)
    cluster.wait_for_nodes(standard=1, preemptible=2)
    # Scale-down removes the newest nodes first: the ones from before the scale-up remain.
    assert set(cluster.node_classes()) == before


@pytest.mark.parametrize("termination", ["eviction", "delete", "signal"])
def test_preemption_plays_cordon_event_termination_deletion_in_order(
    cluster: TwinCluster, namespace: str, termination: str
) -> None:
    victim = cluster.next_victim()
    cluster.core.create_namespaced_pod(namespace, pod_manifest("worker", victim))
    wait_for(lambda: running(cluster, namespace, "worker"), "the pod to run")
    recorder = Recorder(cluster.api).start()

    preempted = cluster.preempt(termination=termination)
    assert preempted["preempted"] == [victim]
    assert preempted["termination"] == termination
    wait_for(lambda: victim not in cluster.node_classes(), "the preempted node to be deleted")
    wait_for(
        lambda: recorder.first(lambda k, t, o: k == "Pod" and t == "DELETED" and o.metadata.name == "worker"),
        "the pod to be collected",
    )
    recorder.stop()

    def of_victim(kind: str, obj: Any) -> bool:
        return (kind == "Node" and obj.metadata.name == victim) or (
            kind == "Event" and obj.involved_object.name == victim
        )

    cordoned = recorder.first(lambda k, t, o: of_victim(k, o) and k == "Node" and bool(o.spec.unschedulable))
    announced = recorder.first(
        lambda k, t, o: of_victim(k, o) and k == "Event" and o.reason == "TogetherPreemptionNotified"
    )
    if termination == "signal":
        terminated = recorder.first(
            lambda k, t, o: k == "Pod" and o.metadata.name == "worker" and 143 in exit_codes(o)
        )
    else:
        terminated = recorder.first(
            lambda k, t, o: (
                k == "Pod" and o.metadata.name == "worker" and o.metadata.deletion_timestamp is not None
            )
        )
    deleted = recorder.first(lambda k, t, o: of_victim(k, o) and k == "Node" and t == "DELETED")
    assert cordoned and announced and terminated and deleted, recorder.changes
    if termination != "signal":
        # The platform's 300 s in the pod's own (emulated) seconds, not the node's few real seconds to live:
        # a process the twin runs gets SIGKILL that long after SIGTERM, as the node is deleted.
        assert terminated[3].metadata.deletion_grace_period_seconds == 300
    assert cordoned[0] < announced[0] < terminated[0] < deleted[0]
    assert announced[3].type == "Warning"
    # One time line: the Event is stamped with the preemption time the compute API reports.
    preempted_at = datetime.fromisoformat(preempted["preempted_at"])
    assert announced[3].first_timestamp == preempted_at.replace(microsecond=0)

    # What the workload saw, by mode, at the moment its containers ended.
    ended = recorder.first(
        lambda k, t, o: k == "Pod" and o.metadata.name == "worker" and o.status.phase == "Failed"
    )
    assert ended is not None and ended[0] < deleted[0]
    pod = ended[3]
    assert exit_codes(pod) == [143]
    disruption = conditions(pod).get("DisruptionTarget")
    if termination == "eviction":
        assert disruption is not None and disruption.reason == "EvictionByEvictionAPI"
    else:
        assert disruption is None
    if termination == "signal":
        assert pod.metadata.deletion_timestamp is None  # no API call: the pod stays until its node goes

    # The platform refills the reclaimed capacity.
    cluster.wait_for_nodes(standard=1, preemptible=2)


@pytest.mark.parametrize("exits", ["at-once", "after-the-grace-period"])
def test_a_preempted_node_is_reclaimed_as_soon_as_its_pods_have_exited(
    cluster: TwinCluster, namespace: str, exits: str
) -> None:
    """The platform's docs: the node goes as soon as its pods exit, at the latest at T+grace."""
    victim = cluster.next_victim()
    annotations = {TERMINATION_DURATION: "1h"} if exits == "after-the-grace-period" else {}
    cluster.core.create_namespaced_pod(namespace, pod_manifest("worker", victim, annotations))
    wait_for(lambda: running(cluster, namespace, "worker"), "the pod to run")

    preempted = cluster.preempt()
    assert preempted["preempted"] == [victim]
    wait_for(lambda: victim not in cluster.node_classes(), "the preempted node to be deleted")

    [gone] = [n for n in cluster.get()["deleted_gpu_worker_nodes"] if n["node_id"] == victim]
    deleted_at = datetime.fromisoformat(gone["deleted_at"])
    if exits == "at-once":
        # The platform's T+grace (on its clock) is delete_at; the pod exited at once, the node went sooner.
        assert deleted_at < datetime.fromisoformat(preempted["delete_at"]), (gone, preempted)
    else:
        assert deleted_at >= datetime.fromisoformat(preempted["delete_at"]), (gone, preempted)
    cluster.wait_for_nodes(standard=1, preemptible=2)


def job_manifest(name: str, node: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A Job as the components write it: no retries, disruptions ignored, exit code 42 fatal."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "podReplacementPolicy": "Failed",
            "podFailurePolicy": {
                "rules": [
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                    {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
                ]
            },
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 300,
                    "affinity": {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "preference": {
                                        "matchExpressions": [
                                            {
                                                "key": "kubernetes.io/hostname",
                                                "operator": "In",
                                                "values": [node],
                                            }
                                        ]
                                    },
                                }
                            ]
                        }
                    },
                    "nodeSelector": {COMPUTE_CLASS: "preemptible"},
                    "tolerations": [PREEMPTIBLE_TOLERATION],
                    "containers": [{"name": "train", "image": "registry.invalid/trainer:1"}],
                },
            },
        },
    }


def job_pods(cluster: TwinCluster, namespace: str, job: str) -> list[Any]:
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items)


def job_condition(cluster: TwinCluster, namespace: str, job: str, kind: str) -> Any:
    status = cluster.batch.read_namespaced_job_status(job, namespace).status
    return next((c for c in status.conditions or [] if c.type == kind and c.status == "True"), None)


def test_a_job_ignoring_disruptions_survives_an_eviction_preemption(
    cluster: TwinCluster, namespace: str
) -> None:
    victim = cluster.next_victim()
    cluster.batch.create_namespaced_job(namespace, job_manifest("train", victim))
    first = wait_for(
        lambda: next((p for p in job_pods(cluster, namespace, "train") if p.status.phase == "Running"), None),
        "the Job's pod to run",
    )
    assert first.spec.node_name == victim

    cluster.preempt(termination="eviction")

    def replacement() -> Any:
        pods = job_pods(cluster, namespace, "train")
        return next(
            (p for p in pods if p.metadata.uid != first.metadata.uid and p.status.phase == "Running"), None
        )

    second = wait_for(replacement, "a replacement pod to run")
    assert second.spec.node_name != victim
    status = cluster.batch.read_namespaced_job_status("train", namespace).status
    assert not status.failed and job_condition(cluster, namespace, "train", "Failed") is None

    # The replacement finishes the work: the Job completes.
    cluster.core.patch_namespaced_pod(
        second.metadata.name, namespace, {"metadata": {"annotations": {EXIT_CODE: "0"}}}
    )
    wait_for(lambda: job_condition(cluster, namespace, "train", "Complete"), "the Job to complete")
    cluster.wait_for_nodes(standard=1, preemptible=2)


@pytest.mark.parametrize("termination", ["delete", "signal"])
def test_the_same_job_fails_when_the_platform_terminates_without_a_disruption_condition(
    cluster: TwinCluster, namespace: str, termination: str
) -> None:
    """What the real controllers do when pods are deleted or signalled: no ``DisruptionTarget``, exit 143,
    so the Ignore rule does not apply and ``backoffLimit: 0`` fails the Job (workloads must cover this)."""
    victim = cluster.next_victim()
    cluster.batch.create_namespaced_job(namespace, job_manifest("train", victim))
    wait_for(
        lambda: next((p for p in job_pods(cluster, namespace, "train") if p.status.phase == "Running"), None),
        "the Job's pod to run",
    )
    cluster.preempt(termination=termination)
    failed = wait_for(lambda: job_condition(cluster, namespace, "train", "Failed"), "the Job to fail")
    assert failed.reason == "BackoffLimitExceeded"
    cluster.wait_for_nodes(standard=1, preemptible=2)


def test_a_job_fails_at_once_on_a_failjob_exit_code(cluster: TwinCluster, namespace: str) -> None:
    # The simulated container runs a while, then exits 42 by itself.
    annotations = {EXIT_CODE: "42", RUN_DURATION: "2s"}
    cluster.batch.create_namespaced_job(namespace, job_manifest("broken", cluster.next_victim(), annotations))
    wait_for(
        lambda: [p for p in job_pods(cluster, namespace, "broken") if p.status.phase == "Running"],
        "it to run",
    )
    failed = wait_for(lambda: job_condition(cluster, namespace, "broken", "Failed"), "the Job to fail")
    assert failed.reason == "PodFailurePolicy"
    [pod] = job_pods(cluster, namespace, "broken")
    assert exit_codes(pod) == [42]


def test_a_deleted_cluster_takes_its_control_plane_with_it(twin_emulator) -> None:
    with TwinCluster.create(twin_emulator, "short-lived", num_gpus=8) as short:
        short.wait_for_nodes(standard=1, preemptible=0)
        plane = _plane(twin_emulator.base_url, short.cluster_id)
    # Deleting takes a minute of platform time (a second at speed 60); then its processes are gone.
    wait_for(lambda: not alive(plane["pids"]), "the control plane's processes to end")
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        short.core.list_node(_request_timeout=2)


def test_the_audit_log_names_who_sent_each_request_and_is_off_by_default(cluster: TwinCluster) -> None:
    """``--audit-log``: the API server writes who sent each request (the bench counts MultiKueue's by it)."""
    default = _plane(cluster.emulator.base_url, cluster.cluster_id)
    assert default["audit_log"] is None
    assert not (Path(default["data_dir"]) / AUDIT_LOG_FILE).exists()
    with start_emulator(speed=60, kubernetes=TwinOptions(audit_log=True)) as emulator:
        with TwinCluster.create(emulator, "audited", num_gpus=8) as audited:
            audited.wait_for_nodes(standard=1, preemptible=0)
            audited.core.list_namespace(label_selector="audited=yes")
            log = Path(_plane(emulator.base_url, audited.cluster_id)["audit_log"])

            def events() -> list[dict[str, Any]]:
                return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

            def ours() -> list[dict[str, Any]]:
                return [
                    e
                    for e in events()
                    if e["verb"] == "list"
                    and e["objectRef"].get("resource") == "namespaces"
                    and "labelSelector=audited" in e["requestURI"]
                ]

            (listed,) = wait_for(lambda: ours() or None, "the namespace listing in the audit log")
            assert listed["user"]["username"] == "audited-admin"
            assert listed["stage"] == "ResponseComplete" and "requestObject" not in listed
            # The control plane's own components are in it under their own names.
            assert any(e["user"]["username"] == "system:kube-scheduler" for e in events())
