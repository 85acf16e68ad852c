"""The emulator serves exactly the official SDK's shapes; what the real API lacks only when asked for."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from together_clusters.emulator.server import RunningEmulator, start_emulator

from .conftest import create_body
from .strict import NODE_EXTRA_FIELDS, strict_cluster, strict_list

HEADERS = {"Authorization": "Bearer key-shapes"}


def _client(emu: RunningEmulator) -> httpx.Client:
    return httpx.Client(base_url=emu.base_url, headers=HEADERS, timeout=10)


def _grown_cluster(client: httpx.Client, admin: Any) -> str:
    """A Ready cluster with standard, preemptible and deleted (preempted) GPU nodes and lifecycle events."""
    created = client.post("/v1/compute/clusters", json=create_body(num_gpus=16, num_preemptible_gpus=16))
    cluster_id = created.json()["cluster_id"]
    admin.advance(700)
    admin.preempt(cluster_id, 1)
    admin.advance(400)
    return str(cluster_id)


def test_default_replies_have_only_the_sdks_fields(emu: RunningEmulator) -> None:
    with _client(emu) as client:
        cluster_id = _grown_cluster(client, emu.admin)
        got = client.get(f"/v1/compute/clusters/{cluster_id}")
        cluster = strict_cluster(got.text)
        assert len(cluster.gpu_worker_nodes) == 4 and cluster.deleted_gpu_worker_nodes
        assert cluster.node_lifecycle_events
        strict_list(client.get("/v1/compute/clusters").text)
        updated = client.put(f"/v1/compute/clusters/{cluster_id}", json={"num_gpus": 24})
        strict_cluster(updated.text)
    for field in NODE_EXTRA_FIELDS:
        assert f'"{field}"' not in got.text


@pytest.fixture(scope="module")
def with_extras() -> Iterator[RunningEmulator]:
    with start_emulator(port=0, speed=0, extra_fields=True) as emu:
        yield emu


def test_extra_fields_option_adds_each_nodes_class(with_extras: RunningEmulator) -> None:
    with _client(with_extras) as client:
        cluster_id = _grown_cluster(client, with_extras.admin)
        raw = client.get(f"/v1/compute/clusters/{cluster_id}").text
        cluster = strict_cluster(raw, node_extras=NODE_EXTRA_FIELDS)
        strict_list(client.get("/v1/compute/clusters").text, node_extras=NODE_EXTRA_FIELDS)
    nodes = cluster.gpu_worker_nodes + (cluster.deleted_gpu_worker_nodes or [])
    classes = {n.node_id: (n.model_extra or {})["compute_class"] for n in nodes}
    assert sorted(classes.values()) == ["preemptible", "preemptible", "preemptible", "standard", "standard"]
    for node in nodes:
        assert (node.model_extra or {})["labels"] == {"together.ai/compute-class": classes[node.node_id]}
    # Only nodes carry them: the cluster itself has exactly the SDK's fields.
    with pytest.raises(AssertionError):
        strict_cluster(raw)


def test_command_line_options_extra_fields_and_default_driver() -> None:
    command = ["--port", "0", "--speed", "0", "--extra-fields", "--default-driver"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "together_clusters.emulator", *command],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        # The socket listens before the URL is printed: requests wait in its backlog until serving starts.
        with httpx.Client(base_url=base_url, headers=HEADERS, timeout=30) as client:
            no_driver = create_body(nvidia_version_id=None)
            cluster_id = client.post("/v1/compute/clusters", json=no_driver).json()["cluster_id"]
            client.post("/_emulator/clock", json={"advance_s": 700})
            cluster = client.get(f"/v1/compute/clusters/{cluster_id}").json()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    node = cluster["gpu_worker_nodes"][0]
    assert node["compute_class"] == "standard"
    assert node["labels"] == {"together.ai/compute-class": "standard"}
    assert cluster["nvidia_driver_version_id"] == "nv-570-cu128-ubuntu2204"


def test_default_driver_option_picks_the_regions_newest() -> None:
    with start_emulator(port=0, speed=0, default_driver=True) as emu, _client(emu) as client:
        created = client.post("/v1/compute/clusters", json=create_body(nvidia_version_id=None))
        chosen = client.post(
            "/v1/compute/clusters",
            json=create_body(cluster_name="chosen", nvidia_version_id="nv-550-cu124-ubuntu2204"),
        )
    assert strict_cluster(created.text).nvidia_driver_version_id == "nv-570-cu128-ubuntu2204"
    assert strict_cluster(chosen.text).nvidia_driver_version_id == "nv-550-cu124-ubuntu2204"
