"""The twin's processes as a user runs them: ``python -m together_clusters.emulator --kubernetes --state FILE``.

A restart keeps every cluster's Kubernetes objects (the control plane is started again on its saved data),
JobSet's webhooks answer again (their port may have moved), and no control plane process outlives the
emulator, whether it stops cleanly or is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from ._twin import DRIVER, GPU, REGION, alive, defaulted_jobset, kube_clients, wait_for

pytestmark = pytest.mark.twin
ROOT = Path(__file__).resolve().parents[2]
HEADERS = {"Authorization": "Bearer twin-restart"}
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and the JobSet controller manager.
PROCESSES = 6


@contextmanager
def emulator_process(state: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "together_clusters.emulator",
            "--port",
            "0",
            "--state",
            str(state),
            "--kubernetes",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else base_url
        yield base_url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def control_plane_pids(base_url: str) -> list[int]:
    status = httpx.get(f"{base_url}/_emulator/kubernetes", timeout=30).json()
    return [pid for plane in status["control_planes"] for pid in plane["pids"]]


def ready_nodes(core: client.CoreV1Api) -> list[str] | None:
    try:
        nodes = core.list_node(_request_timeout=5).items
    except Exception:  # the control plane is (re)starting
        return None
    ready = [
        n.metadata.name
        for n in nodes
        if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    ]
    return sorted(ready) if ready and len(ready) == len(nodes) else None


def test_a_restart_keeps_the_clusters_objects_and_no_process_outlives_the_emulator(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    body: dict[str, Any] = {
        "cluster_name": "restart",
        "region": REGION,
        "gpu_type": GPU,
        "num_gpus": 8,
        "num_preemptible_gpus": 8,
        "billing_type": "ON_DEMAND",
        "nvidia_version_id": DRIVER,
    }
    with emulator_process(state) as (url, _):
        created = httpx.post(f"{url}/v1/compute/clusters", json=body, headers=HEADERS, timeout=30).json()
        api = kube_clients(created["kube_config"])
        core = client.CoreV1Api(api)
        nodes = wait_for(lambda: ready_nodes(core) if len(ready_nodes(core) or []) == 2 else None, "2 nodes")
        core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}, "data": {"step": "1200"}})
        first_pids = wait_for(
            lambda: pids if len(pids := control_plane_pids(url)) == PROCESSES else None,
            "the controllers to start",
        )
        assert defaulted_jobset(api, "before")["spec"]["successPolicy"] == {"operator": "All"}
        api.close()
    assert alive(first_pids) == []

    with emulator_process(state) as (url, proc):
        cluster = httpx.get(
            f"{url}/v1/compute/clusters/{created['cluster_id']}", headers=HEADERS, timeout=30
        ).json()
        api = kube_clients(cluster["kube_config"])
        core = client.CoreV1Api(api)
        assert wait_for(lambda: ready_nodes(core), "the nodes after the restart") == nodes
        assert core.read_namespaced_config_map("kept", "default").data == {"step": "1200"}
        second_pids = wait_for(
            lambda: pids if len(pids := control_plane_pids(url)) == PROCESSES else None,
            "the controllers to start again",
        )
        assert defaulted_jobset(api, "after")["spec"]["successPolicy"] == {"operator": "All"}
        api.close()
        # Killed outright, the emulator cannot stop anything: its processes must end by themselves.
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    wait_for(lambda: not alive(second_pids), "the control plane to end with the killed emulator", timeout=30)
