"""The twin's processes as a user runs them: ``python -m together_clusters.emulator --kubernetes --state FILE``.

A restart keeps every cluster's Kubernetes objects (the control plane is started again on its saved data),
JobSet's webhooks answer again (their port may have moved), and no control plane process outlives the
emulator, whether it stops cleanly or is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from tests.emulator_process import emulator_process

from ._twin import alive, create_body, defaulted_jobset, kube_clients, wait_for

pytestmark = pytest.mark.twin
HEADERS = {"Authorization": "Bearer twin-restart"}
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and the JobSet controller manager.
PROCESSES = 6


def twin_process(state: Path) -> AbstractContextManager[tuple[str, subprocess.Popen[str]]]:
    """The emulator with the twin, keeping its state in ``state``: its URL and process. Its control planes may
    take a while to stop."""
    return emulator_process("--state", str(state), "--kubernetes", "--jobset", stop_timeout=60)


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
    body = create_body("restart", num_gpus=8, num_preemptible_gpus=8)
    with twin_process(state) as (url, _):
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

    with twin_process(state) as (url, proc):
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
