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

from .conftest import DRIVER, GPU, REGION
from .strict import strict_cluster, strict_delete, strict_list, strict_regions, strict_whoami

TG = Path(sys.executable).with_name("tg")
KEY = "key-tg-cli"


def _tg(emu: RunningEmulator, home: Path, *args: str) -> Any:
    """Run ``tg <args> --json --non-interactive`` against the emulator; its stdout, decoded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOGETHER_")}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(home / "cache"),
        TOGETHER_API_KEY=KEY,
        TOGETHER_BASE_URL=emu.base_url,
        # No network beyond the emulator: no telemetry, no version check; CI: no shell completion install.
        TOGETHER_TELEMETRY_DISABLED="1",
        TOGETHER_DISABLE_VERSION_CHECK="1",
        TOGETHER_CREDENTIALS_PATH=str(home / "credentials.json"),
        CI="1",
    )
    proc = subprocess.run(
        [str(TG), *args, "--json", "--non-interactive"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"tg {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_tg_clusters_commands(emu: RunningEmulator, http: Any, tmp_path: Path) -> None:
    assert TG.exists(), f"the together package's tg entry point is not at {TG}"
    project_id = strict_whoami(http(KEY).get("/v3/whoami").text).project.id

    regions = strict_regions(_tg(emu, tmp_path, "clusters", "list-regions"))
    assert {r.name for r in regions.regions} == {"us-central-8", "us-east-2", "eu-north-1"}

    created = strict_cluster(
        _tg(
            emu,
            tmp_path,
            "clusters",
            "create",
            "--name",
            "from-tg",
            "--num-gpus",
            "8",
            "--num-preemptible-gpus",
            "8",
            "--region",
            REGION,
            "--gpu-type",
            GPU,
            "--billing-type",
            "ON_DEMAND",
            "--nvidia-version-id",
            DRIVER,
        )
    )
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
