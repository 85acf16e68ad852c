"""A control plane process that ends is started again, as the kubelet restarts a crashed static pod.

CI met this: the JobSet controller manager's webhook port, picked when the cluster was created, was taken by
another socket by the time the manager started seconds later; the manager exited on ``bind: address already
in use`` and the cluster never served (its ``pulumi up`` hung for ten minutes). Here the port is taken on
purpose; and the running manager, scheduler, kwok, API server and etcd are killed.

Oracles: the real API server calling JobSet's webhook at the address in its webhook configuration (a JobSet is
defaulted only by the manager's webhook), the real scheduler binding a pod, the processes in ``/proc``, and
the compute API's phases of a cluster whose JobSet manager cannot start at all.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.emulator.kubernetes import binaries
from together_clusters.emulator.kubernetes.binaries import Binaries
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.emulator.kubernetes.platform import TwinnedPlatform
from together_clusters.emulator.kubernetes.twin import Twin
from together_clusters.emulator.server import RunningEmulator, start_emulator

from ._twin import JOBSETS, TwinCluster, defaulted_jobset, wait_for
from .conftest import require_twin
from .test_local_runtime import local_pod, log_of

pytestmark = pytest.mark.twin


@pytest.fixture(scope="module")
def emulator() -> Iterator[RunningEmulator]:
    require_twin()
    with start_emulator(speed=60, kubernetes=TwinOptions(jobset=True)) as running:
        yield running


def twin_of(emulator: RunningEmulator) -> Twin:
    platform = emulator.platform
    assert isinstance(platform, TwinnedPlatform)
    return platform.twin


def data_dir(emulator: RunningEmulator, cluster: TwinCluster) -> Path:
    return twin_of(emulator).root / cluster.cluster_id


def plane_of(emulator: RunningEmulator, cluster: TwinCluster) -> dict[str, Any] | None:
    """The twin's status of the cluster's control plane, once it is launched."""
    planes = [p for p in twin_of(emulator).status() if p["cluster_id"] == cluster.cluster_id]
    return planes[0] if planes else None


def ports(directory: Path) -> dict[str, int]:
    return dict(json.loads((directory / "ports.json").read_text()))


def process_of(directory: Path, program: str) -> int | None:
    """The PID of the control plane process ``program`` (its command line names the cluster's directory)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not any(str(directory).encode() in arg for arg in argv):
            continue
        names = [os.path.basename(a.decode(errors="replace")) for a in argv[:2]]
        if program in names:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z":
                return int(entry.name)
    return None


def kill(directory: Path, program: str) -> int:
    """SIGKILL the running control plane process ``program``; its PID."""
    pid = process_of(directory, program)
    assert pid is not None, f"no {program} running"
    os.kill(pid, signal.SIGKILL)
    return pid


def started_again(directory: Path, program: str, killed: int) -> int:
    """The PID of ``program`` once the twin has started it again after ``killed``."""

    def new_pid() -> int | None:
        pid = process_of(directory, program)
        return pid if pid not in (None, killed) else None

    return wait_for(new_pid, f"{program} started again")


@contextmanager
def serving_cluster(emulator: RunningEmulator, name: str) -> Iterator[tuple[TwinCluster, Path]]:
    """A cluster of ``name`` once its standard node is Ready, and its control plane's directory."""
    with TwinCluster.create(emulator, name, num_gpus=8) as cluster:
        cluster.wait_for_nodes(standard=1, preemptible=0)
        yield cluster, data_dir(emulator, cluster)


def listen_on(port: int) -> socket.socket:
    taker = socket.socket()
    taker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    taker.bind(("127.0.0.1", port))
    taker.listen()
    return taker


def scheduled(cluster: TwinCluster, name: str) -> str | None:
    pod = cluster.core.read_namespaced_pod(name, "default")
    return str(pod.spec.node_name) if pod.spec.node_name else None


def test_a_jobset_manager_whose_port_was_taken_before_it_started_comes_up_on_another(
    emulator: RunningEmulator,
) -> None:
    with TwinCluster.create(emulator, "port-taken", num_gpus=8) as cluster:
        # Once its control plane is launched (its ports final), before the manager starts.
        wait_for(lambda: plane_of(emulator, cluster), "the cluster's control plane to launch")
        directory = data_dir(emulator, cluster)
        taken = ports(directory)["jobset_webhook"]
        with listen_on(taken):
            cluster.wait_for_nodes(standard=1, preemptible=0)
            created = defaulted_jobset(cluster.api, "after-port-taken")
            # Set by JobSet's defaulting webhook only: the API server reached the manager at its new port.
            assert created["spec"]["successPolicy"] == {"operator": "All"}
            assert ports(directory)["jobset_webhook"] != taken
        plane = plane_of(emulator, cluster)
        assert plane is not None and plane["restarts"] == {"jobset": 1}
        assert twin_of(emulator).errors == []


def test_killed_controllers_are_started_again_and_the_cluster_goes_on_serving(
    emulator: RunningEmulator,
) -> None:
    with serving_cluster(emulator, "killed") as (cluster, directory):
        defaulted_jobset(cluster.api, "before")

        manager = kill(directory, "jobset")
        scheduler = kill(directory, "kube-scheduler")
        created = defaulted_jobset(cluster.api, "after")
        assert created["spec"]["successPolicy"] == {"operator": "All"}
        assert process_of(directory, "jobset") not in (None, manager)

        pod = {
            "metadata": {"name": "after-scheduler-kill"},
            "spec": {"containers": [{"name": "main", "image": "registry.invalid/t:1"}]},
        }
        cluster.core.create_namespaced_pod("default", pod)
        wait_for(lambda: scheduled(cluster, "after-scheduler-kill"), "a node from the restarted scheduler")
        assert process_of(directory, "kube-scheduler") not in (None, scheduler)
        assert twin_of(emulator).errors == []


def test_a_killed_api_server_and_etcd_come_back_with_the_clusters_objects(emulator: RunningEmulator) -> None:
    with serving_cluster(emulator, "killed-api") as (cluster, directory):
        defaulted_jobset(cluster.api, "kept")
        etcd = kill(directory, "etcd")
        started_again(directory, "kube-apiserver", kill(directory, "kube-apiserver"))
        cluster.wait_for_nodes(standard=1, preemptible=0)
        created = defaulted_jobset(cluster.api, "after-api-kill")
        assert created["spec"]["successPolicy"] == {"operator": "All"}
        names = [
            j["metadata"]["name"]
            for j in client.CustomObjectsApi(cluster.api).list_namespaced_custom_object(*JOBSETS)["items"]
        ]
        assert sorted(names) == ["after-api-kill", "kept"]
        assert process_of(directory, "etcd") not in (None, etcd)
        assert twin_of(emulator).errors == []


def kill_and_take_port(directory: Path, program: str, port_name: str) -> socket.socket:
    """Kill ``program`` and take its port before the twin starts it again (the twin looks a few times a
    second, this loop far more often; should the twin still win, kill the new process and try again).
    Returns once the killed process is gone, so that a process of ``program`` found after it is the one the
    twin started again (a SIGKILLed process stays in /proc a moment: CI once read the old port for the new
    process)."""
    for _ in range(3):
        port = ports(directory)[port_name]
        pid = kill(directory, program)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                taker = listen_on(port)
                wait_for(lambda killed=pid: process_of(directory, program) != killed or None, f"{program} gone")
                return taker
            except OSError:
                if process_of(directory, program) not in (None, pid):
                    break  # started again on it already
    raise AssertionError(f"could not take {program}'s port {port_name} from the twin")


def test_kwok_started_again_on_another_port_still_serves_pod_logs_of_existing_nodes(
    emulator: RunningEmulator,
) -> None:
    with serving_cluster(emulator, "kubelet-port") as (cluster, directory):
        program = "import time\nprint('hello from before', flush=True)\ntime.sleep(600)\n"
        cluster.core.create_namespaced_pod("default", local_pod("logger", program))
        wait_for(lambda: log_of(cluster, "default", "logger", "hello from before"), "the pod's log")
        with kill_and_take_port(directory, "kwok", "kubelet") as taker:
            wait_for(lambda: process_of(directory, "kwok"), "kwok started again")
            assert ports(directory)["kubelet"] != taker.getsockname()[1]
            # The API server reaches the node's kubelet at the port its Node advertises: the new one.
            text = wait_for(
                lambda: log_of(cluster, "default", "logger", "hello from before"), "the log after kwok moved"
            )
        assert "hello from before" in text
        cluster.core.delete_namespaced_pod("logger", "default", grace_period_seconds=0)
        assert twin_of(emulator).errors == []


def broken_jobset(directory: Path) -> Binaries:
    """The built binaries, but a JobSet manager that exits at once, saying why on stderr."""
    real = binaries.require(jobset=True)
    directory.mkdir()
    for source in (real.kubernetes, real.kubectl, real.jobset_crd, real.jobset_role):
        (directory / source.name).symlink_to(source)
    manager = directory / "jobset"
    manager.write_text("#!/bin/sh\necho 'jobset: no usable webhook certificate' >&2\nexit 3\n")
    manager.chmod(0o755)
    return Binaries(kubernetes=directory / real.kubernetes.name, kwok=real.kwok)


def test_a_manager_moved_while_the_api_server_is_down_has_its_webhooks_pointed_once_it_is_back(
    emulator: RunningEmulator,
) -> None:
    with serving_cluster(emulator, "moved-api-down") as (cluster, directory):
        defaulted_jobset(cluster.api, "before")
        api_server = kill(directory, "kube-apiserver")
        # The manager comes back on another port while no API server takes the new webhook address.
        with kill_and_take_port(directory, "jobset", "jobset_webhook"):
            started_again(directory, "kube-apiserver", api_server)
            cluster.wait_for_nodes(standard=1, preemptible=0)
            created = defaulted_jobset(cluster.api, "after")
        assert created["spec"]["successPolicy"] == {"operator": "All"}
        assert twin_of(emulator).errors == []


def test_a_manager_that_keeps_exiting_fails_the_clusters_provisioning_with_its_last_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_twin()
    fake = broken_jobset(tmp_path / "bin")
    monkeypatch.setattr(binaries, "require", lambda jobset: fake)
    with (
        start_emulator(speed=60, kubernetes=TwinOptions(jobset=True)) as running,
        TwinCluster.create(running, "broken", num_gpus=8) as cluster,
    ):
        phase = wait_for(
            lambda: p if (p := cluster.get()["phase_transitions"][-1]["phase"]).endswith("FAILED") else None,
            "the cluster's provisioning to fail",
        )
        assert phase == "CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED"
        assert cluster.get()["status"] != "Ready"
        twin = twin_of(running)
        [error] = twin.errors
        assert "jobset exited with code 3, 7 times in a row" in error
        assert "no usable webhook certificate" in error
        [plane] = twin.status()
        assert plane["restarts"] == {"jobset": 6}
