"""The official ``tg`` CLI (from the pinned ``together`` package) drives the emulator as real subprocesses.

Every ``tg clusters`` command first asks ``GET /v3/whoami`` for the key's project, then calls the compute
API through the SDK; ``--json`` prints the SDK's parsed reply, which is checked against the SDK's types.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from together_clusters.emulator.server import RunningEmulator
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.mapping import live_outputs

from .conftest import DRIVER, GPU, REGION
from .strict import (
    strict_cluster,
    strict_delete,
    strict_list,
    strict_regions,
    strict_volume,
    strict_volume_delete,
    strict_volumes,
    strict_whoami,
)

TG = Path(sys.executable).with_name("tg")
KEY = "key-tg-cli"


def _tg(emu: RunningEmulator, home: Path, *args: str) -> Any:
    """Run ``tg <args> --json --non-interactive`` against the emulator; its stdout (it must succeed)."""
    proc = _run_tg(emu, home, *args)
    assert proc.returncode == 0, f"tg {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _run_tg(emu: RunningEmulator, home: Path, *args: str, key: str = KEY) -> subprocess.CompletedProcess[str]:
    """Run ``tg <args> --json --non-interactive`` against the emulator with the API key ``key``, however it
    ends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOGETHER_")}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(home / "cache"),
        TOGETHER_API_KEY=key,
        TOGETHER_BASE_URL=emu.base_url,
        # No network beyond the emulator: no telemetry, no version check; CI: no shell completion install.
        TOGETHER_TELEMETRY_DISABLED="1",
        TOGETHER_DISABLE_VERSION_CHECK="1",
        TOGETHER_CREDENTIALS_PATH=str(home / "credentials.json"),
        CI="1",
    )
    return subprocess.run(
        [str(TG), *args, "--json", "--non-interactive"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_tg_clusters_commands(emu: RunningEmulator, http: Any, tmp_path: Path) -> None:
    assert TG.exists(), f"the together package's tg entry point is not at {TG}"
    project_id = strict_whoami(http(KEY).get("/v3/whoami").text).project.id

    regions = strict_regions(_tg(emu, tmp_path, "clusters", "list-regions"))
    assert {r.name for r in regions.regions} == {"us-central-8", "us-east-2", "eu-north-1"}

    created = _create_cluster(emu, tmp_path, "from-tg", "--num-preemptible-gpus", "8")
    assert created.cluster_name == "from-tg" and created.nvidia_driver_version_id == DRIVER
    # tg resolved the key's project with whoami: the cluster belongs to it.
    assert created.project_id == project_id

    emu.admin.advance(700)
    updated = strict_cluster(_tg(emu, tmp_path, "clusters", "update", created.cluster_id, "--num-gpus", "16"))
    assert updated.num_gpus == 16 and updated.cluster_id == created.cluster_id

    # tg base64-decodes kube_config, as the real API sends it (together 3.1.1, get_credentials.py).
    credentials = json.loads(
        _tg(emu, tmp_path, "clusters", "get-credentials", created.cluster_id, "--file", "-")
    )
    assert "kubeconfig" in credentials, credentials
    kubeconfig = yaml.safe_load(credentials["kubeconfig"])
    assert kubeconfig["kind"] == "Config"
    assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://")

    listed = strict_list(_tg(emu, tmp_path, "clusters", "list"))
    assert [c.cluster_id for c in listed.clusters] == [created.cluster_id]
    assert listed.clusters[0].status == "Ready"

    deleted = strict_delete(_tg(emu, tmp_path, "clusters", "delete", created.cluster_id))
    assert deleted.cluster_id == created.cluster_id
    [live] = emu.admin.clusters()
    assert live["status"] == "Deleting"
    assert KEY not in json.dumps(live)


def _create_cluster(emu: RunningEmulator, home: Path, name: str, *extra: str) -> Any:
    return strict_cluster(
        _tg(
            emu,
            home,
            "clusters",
            "create",
            "--name",
            name,
            "--num-gpus",
            "8",
            "--region",
            REGION,
            "--gpu-type",
            GPU,
            "--billing-type",
            "ON_DEMAND",
            "--nvidia-version-id",
            DRIVER,
            *extra,
        )
    )


def test_tg_retrieve_and_get_credentials_agree_with_the_providers_outputs(
    emu: RunningEmulator, tmp_path: Path
) -> None:
    created = _create_cluster(emu, tmp_path, "agree")
    emu.admin.advance(700)
    shown = strict_cluster(_tg(emu, tmp_path, "clusters", "retrieve", created.cluster_id))
    credentials = json.loads(
        _tg(emu, tmp_path, "clusters", "get-credentials", created.cluster_id, "--file", "-")
    )
    with TogetherClient(api_key=KEY, base_url=emu.base_url) as client:
        outputs = live_outputs(client.get_cluster(created.cluster_id))
    assert outputs["cluster_id"] == shown.cluster_id
    assert outputs["status"] == shown.status == "Ready"
    assert outputs["desired_preemptible_gpus"] == shown.desired_preemptible_gpus
    assert outputs["standard_nodes"] == len(shown.gpu_worker_nodes) == 1
    # The provider's kube_config output is exactly the kubeconfig tg writes.
    assert outputs["kube_config"] == credentials["kubeconfig"]


def test_tg_clusters_storage_commands(emu: RunningEmulator, tmp_path: Path) -> None:
    client = TogetherClient(api_key=KEY, base_url=emu.base_url)
    created = strict_volume(
        _tg(
            emu,
            tmp_path,
            "clusters",
            "storage",
            "create",
            "--region",
            REGION,
            "--size-tib",
            "2",
            "--volume-name",
            "ckpt",
            "--is-lifecycle-independent",
        )
    )
    assert (created.volume_name, created.size_tib, created.status) == ("ckpt", 2, "available")
    seen = client.get_volume(created.volume_id)
    assert (seen.volume_name, seen.size_tib, seen.status) == ("ckpt", 2, "available")

    listed = strict_volumes(_tg(emu, tmp_path, "clusters", "storage", "list"))
    assert [v.volume_id for v in listed.volumes] == [created.volume_id]
    assert [v.volume_id for v in client.list_volumes()] == [created.volume_id]

    grown = strict_volume(
        _tg(emu, tmp_path, "clusters", "storage", "update", created.volume_id, "--size-tib", "3")
    )
    assert grown.size_tib == 3 and client.get_volume(created.volume_id).size_tib == 3
    # A shrink is refused, and the volume keeps its size.
    shrink = _run_tg(emu, tmp_path, "clusters", "storage", "update", created.volume_id, "--size-tib", "1")
    assert shrink.returncode != 0 and "size_tib" in shrink.stdout + shrink.stderr
    assert (
        strict_volume(_tg(emu, tmp_path, "clusters", "storage", "retrieve", created.volume_id)).size_tib == 3
    )

    # A cluster using it: the volume is bound, shows in the cluster, and cannot be deleted meanwhile.
    cluster = _create_cluster(emu, tmp_path, "with-volume", "--volume", created.volume_id)
    assert [(v.volume_id, v.volume_name) for v in cluster.volumes] == [(created.volume_id, "ckpt")]
    bound = strict_volume(_tg(emu, tmp_path, "clusters", "storage", "retrieve", created.volume_id))
    assert bound.status == "bound" and client.get_volume(created.volume_id).status == "bound"
    refused = _run_tg(emu, tmp_path, "clusters", "storage", "delete", created.volume_id)
    assert refused.returncode != 0 and "attached" in refused.stdout + refused.stderr

    # Lifecycle-independent: the cluster's deletion leaves the volume, available again.
    _tg(emu, tmp_path, "clusters", "delete", cluster.cluster_id)
    emu.admin.advance(3600)
    assert strict_volume(_tg(emu, tmp_path, "clusters", "storage", "retrieve", created.volume_id)).status == (
        "available"
    )
    deleted = strict_volume_delete(_tg(emu, tmp_path, "clusters", "storage", "delete", created.volume_id))
    assert deleted.success
    assert strict_volumes(_tg(emu, tmp_path, "clusters", "storage", "list")).volumes == []
    client.close()
