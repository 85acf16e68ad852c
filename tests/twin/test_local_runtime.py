"""Pods that opt in (``twin.together.ai/run: local``) run as real processes on the twin, as a kubelet runs them.

Oracles: the API server (pod status, the ``DisruptionTarget`` condition it sets on eviction), the pod log read
through the API (served by kwok's kubelet server from the process's output) and ``kubectl logs``, and files the
processes write on their volumes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from together_clusters.emulator.kubernetes import binaries
from together_clusters.emulator.kubernetes.kwok_config import RUN, RUN_LOCAL, SIGTERM

from ._twin import COMPUTE_CLASS, TwinCluster, alive, create_body, kube_clients, pod_log, wait_for
from .test_processes import ready_nodes, twin_process

pytestmark = pytest.mark.twin

TOLERATION = {"key": COMPUTE_CLASS, "operator": "Equal", "value": "preemptible", "effect": "NoSchedule"}


def local_pod(
    name: str,
    program: str,
    *,
    env: list[dict[str, Any]] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    mounts: list[dict[str, Any]] | None = None,
    grace: int = 300,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "registry.invalid/trainer:1",
        "command": ["python", "-c"],
        "args": [textwrap.dedent(program)],
    }
    if env:
        container["env"] = env
    if mounts:
        container["volumeMounts"] = mounts
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": grace,
        "tolerations": [TOLERATION],
        "containers": [container],
    }
    if volumes:
        spec["volumes"] = volumes
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {RUN: RUN_LOCAL}, "labels": labels or {}},
        "spec": spec,
    }


def phase(cluster: TwinCluster, namespace: str, name: str, *phases: str) -> Any:
    try:
        pod = cluster.core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return pod if pod.status.phase in phases else None


def terminated(pod: Any) -> Any:
    statuses = pod.status.container_statuses or []
    return statuses[0].state.terminated if statuses and statuses[0].state.terminated else None


def log_of(cluster: TwinCluster, namespace: str, name: str, wanted: str) -> str | None:
    text = pod_log(cluster.core, name, namespace, container="main")
    return text if wanted in text else None


def test_a_pod_runs_its_command_with_env_volumes_and_logs_through_the_api(
    cluster: TwinCluster, namespace: str, tmp_path
) -> None:
    core = cluster.core
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"lr": "0.1", "file.txt": "from a configmap"}}
    )
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "creds"}, "stringData": {"token": "s3cr3t"}}
    )
    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "shared"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    volumes = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}},
        {"name": "settings", "configMap": {"name": "settings"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    mounts = [
        {"name": "data", "mountPath": "/data"},
        {"name": "settings", "mountPath": "/etc/settings"},
        {"name": "scratch", "mountPath": "/scratch"},
    ]
    env = [
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "ROLE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['role']"}}},
        {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "lr"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "OUT", "value": "/data/$(POD).txt"},
    ]
    writer = """\
        import os
        print("env", os.environ["POD"], os.environ["NS"], os.environ["ROLE"], os.environ["LR"],
              os.environ["TOKEN"], flush=True)
        print("file", open(os.path.join(os.environ["SETTINGS"], "file.txt")).read())
        with open(os.environ["OUT"], "w") as f:
            f.write("written by " + os.environ["POD"])
        open(os.path.join(os.environ["SCRATCH"], "x"), "w").write("x")
    """
    env_writer = [
        *env,
        {"name": "SETTINGS", "value": "/etc/settings"},
        {"name": "SCRATCH", "value": "/scratch"},
    ]
    core.create_namespaced_pod(
        namespace,
        local_pod("writer", writer, env=env_writer, volumes=volumes, mounts=mounts, labels={"role": "w"}),
    )
    done = wait_for(lambda: phase(cluster, namespace, "writer", "Succeeded", "Failed"), "the writer to end")
    log = wait_for(lambda: log_of(cluster, namespace, "writer", "file"), "the writer's log through the API")
    assert done.status.phase == "Succeeded", log
    assert terminated(done).exit_code == 0
    assert f"env writer {namespace} w 0.1 s3cr3t" in log
    assert "file from a configmap" in log

    # The claim is one folder for every pod using it: a second pod reads what the first wrote.
    reader = 'import os; print("read", open(os.environ["IN"]).read(), flush=True)'
    core.create_namespaced_pod(
        namespace,
        local_pod(
            "reader",
            reader,
            env=[{"name": "IN", "value": "/data/writer.txt"}],
            volumes=volumes,
            mounts=mounts,
        ),
    )
    wait_for(lambda: phase(cluster, namespace, "reader", "Succeeded", "Failed"), "the reader to end")
    assert "read written by writer" in wait_for(
        lambda: log_of(cluster, namespace, "reader", "read"), "the reader's log"
    )

    # kubectl reads the same log through the API.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(cluster.kubeconfig)
    kubectl = subprocess.run(
        [str(binaries.require().kubectl), f"--kubeconfig={kubeconfig}", "-n", namespace, "logs", "reader"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "read written by writer" in kubectl.stdout


def test_a_pod_ends_with_its_process_exit_code(cluster: TwinCluster, namespace: str) -> None:
    cluster.core.create_namespaced_pod(namespace, local_pod("crash", "import sys; sys.exit(3)"))
    pod = wait_for(lambda: phase(cluster, namespace, "crash", "Failed", "Succeeded"), "the pod to end")
    assert pod.status.phase == "Failed"
    assert terminated(pod).exit_code == 3


SAVER = """\
    import signal, sys, time
    def stop(*_):
        print("SIGTERM received", flush=True)
        time.sleep(0.2)
        sys.exit(143)
    signal.signal(signal.SIGTERM, stop)
    print("started", flush=True)
    while True:
        time.sleep(0.1)
"""
STUBBORN = """\
    import signal, time
    signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
    print("started", flush=True)
    while True:
        time.sleep(0.1)
"""


def _started(cluster: TwinCluster, namespace: str, name: str) -> None:
    wait_for(lambda: phase(cluster, namespace, name, "Running"), f"{name} to run")
    wait_for(lambda: log_of(cluster, namespace, name, "started"), f"{name} to start")


def test_an_evicted_pod_gets_sigterm_keeps_its_disruption_condition_and_is_deleted(
    cluster: TwinCluster, namespace: str
) -> None:
    core = cluster.core
    # A finalizer keeps the pod visible after the kubelet's final delete, as a Job's tracking finalizer does.
    manifest = local_pod("evicted", SAVER)
    manifest["metadata"]["finalizers"] = ["twin.together.ai/test"]
    core.create_namespaced_pod(namespace, manifest)
    _started(cluster, namespace, "evicted")
    eviction = {
        "metadata": {"name": "evicted", "namespace": namespace},
        "deleteOptions": {"gracePeriodSeconds": 300},
    }
    core.create_namespaced_pod_eviction("evicted", namespace, eviction)
    pod = wait_for(lambda: phase(cluster, namespace, "evicted", "Failed"), "the evicted pod to fail")
    assert terminated(pod).exit_code == 143
    disruption = [c for c in pod.status.conditions if c.type == "DisruptionTarget"]
    assert disruption and disruption[0].reason == "EvictionByEvictionAPI"
    # The kubelet's final delete (grace 0): only the finalizer holds the pod now.
    assert wait_for(
        lambda: (
            (p := core.read_namespaced_pod("evicted", namespace)).metadata.deletion_grace_period_seconds == 0
            and p
        ),
        "the final delete",
    )
    core.patch_namespaced_pod("evicted", namespace, {"metadata": {"finalizers": None}})
    wait_for(lambda: phase(cluster, namespace, "evicted", "Failed") is None, "the pod to go")


def test_a_pod_ignoring_sigterm_is_killed_when_its_grace_period_ends(
    cluster: TwinCluster, namespace: str
) -> None:
    core = cluster.core
    manifest = local_pod("stubborn", STUBBORN, grace=60)  # 60 s at the package's speed 60: one real second
    manifest["metadata"]["finalizers"] = ["twin.together.ai/test"]
    core.create_namespaced_pod(namespace, manifest)
    _started(cluster, namespace, "stubborn")
    core.delete_namespaced_pod("stubborn", namespace)
    pod = wait_for(lambda: phase(cluster, namespace, "stubborn", "Failed"), "the stubborn pod to be killed")
    assert terminated(pod).exit_code == 137
    assert "ignoring SIGTERM" in (log_of(cluster, namespace, "stubborn", "ignoring") or "")
    core.patch_namespaced_pod("stubborn", namespace, {"metadata": {"finalizers": None}})


def test_the_platforms_sigterm_annotation_signals_the_process_without_deleting_the_pod(
    cluster: TwinCluster, namespace: str
) -> None:
    core = cluster.core
    core.create_namespaced_pod(namespace, local_pod("signalled", SAVER))
    _started(cluster, namespace, "signalled")
    core.patch_namespaced_pod("signalled", namespace, {"metadata": {"annotations": {SIGTERM: "now"}}})
    pod = wait_for(lambda: phase(cluster, namespace, "signalled", "Failed"), "the signalled pod to fail")
    assert terminated(pod).exit_code == 143
    assert pod.metadata.deletion_timestamp is None
    assert "SIGTERM received" in (log_of(cluster, namespace, "signalled", "SIGTERM") or "")


def test_a_simulated_pod_next_to_them_is_still_simulated(cluster: TwinCluster, namespace: str) -> None:
    manifest = local_pod("simulated", "import sys; sys.exit(5)")
    manifest["metadata"]["annotations"] = {}
    cluster.core.create_namespaced_pod(namespace, manifest)
    pod = wait_for(lambda: phase(cluster, namespace, "simulated", "Running"), "kwok to run the pod")
    # kwok's simulated container: no process, no container ID of the local runtime.
    assert not (pod.status.container_statuses[0].container_id or "").startswith("local://")


PARENT = """\
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("child", child.pid, flush=True)
    time.sleep(600)
"""


def test_no_process_outlives_the_emulator_even_killed_outright(tmp_path) -> None:
    body = create_body("orphans", num_gpus=8, num_preemptible_gpus=8)
    headers = {"Authorization": "Bearer twin-orphans"}
    with twin_process(tmp_path / "state.db") as (url, proc):
        created = httpx.post(f"{url}/v1/compute/clusters", json=body, headers=headers, timeout=30).json()
        api = kube_clients(created["kube_config"])
        core = client.CoreV1Api(api)
        wait_for(lambda: len(ready_nodes(core) or []) == 2, "2 nodes")
        wait_for(lambda: core.read_namespaced_service_account("default", "default"), "the default account")
        core.create_namespaced_pod("default", local_pod("parent", PARENT))

        def logged_child() -> int | None:
            log = pod_log(core, "parent", container="main")
            return int(log.split()[1]) if log.startswith("child ") else None

        child = wait_for(logged_child, "the pod to start its child")
        status = httpx.get(f"{url}/_emulator/kubernetes", timeout=30).json()
        pod_pids = [pid for plane in status["control_planes"] for pid in plane["pod_pids"]]
        assert len(pod_pids) == 1 and alive([*pod_pids, child]) == [*pod_pids, child]
        api.close()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    wait_for(
        lambda: not alive([*pod_pids, child]), "the pod's processes to end with the emulator", timeout=30
    )


FLAKY = """\
    import os, sys
    marker = os.path.join(os.environ["SCRATCH"], "tried")
    if not os.path.exists(marker):
        open(marker, "w").close()
        print("first try fails", flush=True)
        sys.exit(1)
    print("second try succeeds", flush=True)
"""


def test_a_failed_container_is_restarted_in_place_under_on_failure(
    cluster: TwinCluster, namespace: str
) -> None:
    manifest = local_pod(
        "flaky",
        FLAKY,
        env=[{"name": "SCRATCH", "value": "/scratch"}],
        volumes=[{"name": "scratch", "emptyDir": {}}],
        mounts=[{"name": "scratch", "mountPath": "/scratch"}],
    )
    manifest["spec"]["restartPolicy"] = "OnFailure"
    cluster.core.create_namespaced_pod(namespace, manifest)
    # The kubelet's back-off (10 s) before the second try; the emptyDir outlives the first container.
    pod = wait_for(lambda: phase(cluster, namespace, "flaky", "Succeeded", "Failed"), "the second try")
    assert pod.status.phase == "Succeeded"
    status = pod.status.container_statuses[0]
    assert status.restart_count == 1 and status.state.terminated.exit_code == 0
    assert "second try succeeds" in (log_of(cluster, namespace, "flaky", "second") or "")
