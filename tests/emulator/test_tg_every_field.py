"""``tg clusters create`` with every flag it has, against the emulator; ``tg clusters get`` shows each as sent.

The oracle is the official CLI (``together`` 3.1.1), nobody's code here: each flag of ``tg clusters create
--help`` is set by one of two creates (a Kubernetes cluster and a Slurm one, since some flags exclude others:
``--nvidia-version-id`` or the driver, CUDA and OS it resolves from the regions; ``--auto-scale`` or
``--no-auto-scale``), and ``tg clusters get`` must show each field the response type reports with the value
sent. The response type does not report ``auto_scale``, ``auto_scale_max_gpus`` and ``slurm_image``: the
emulator's record of ignored fields shows that they reached it as fields the API defines, and its admin API
shows the autoscaling settings it keeps.

The SDK's create fields ``tg`` has no flag for: ``acceptance_tests_params``, ``cluster_config``,
``oidc_config`` and ``shared_volume`` (only its interactive prompts make an inline volume); ``add_ons`` only
as ``--headlamp-addon`` and ``--slurm-web-addon``; ``cuda_version`` and ``nvidia_driver_version`` are flags
but never sent: ``tg`` resolves them to ``nvidia_version_id``; ``project_id`` is the global ``--project``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from together_clusters.emulator.server import RunningEmulator

from .conftest import DRIVER, GPU, REGION
from .strict import strict_cluster, strict_volume, strict_whoami
from .test_tg_cli import KEY, TG, _run_tg, _tg

POOL = "pool-tg"

KUBE_FLAGS = {
    "--name": "tg-kube",
    "--num-gpus": "16",
    "--region": REGION,
    "--gpu-type": GPU,
    "--billing-type": "RESERVED",
    "--nvidia-version-id": DRIVER,
    "--duration-days": "30",
    "--cluster-type": "KUBERNETES",
    "--auto-scale": None,
    "--auto-scale-max-gpus": "32",
    "--capacity-pool-id": POOL,
    "--num-capacity-pool-gpus": "8",
    "--install-traefik": None,
    "--headlamp-addon": None,
    "--num-preemptible-gpus": "8",
    "--num-reserved-gpus": "16",
    "--reservation-start-time": "2027-01-01T00:00:00Z",
    "--reservation-end-time": "2027-02-01T00:00:00Z",
}
SLURM_FLAGS = {
    "--name": "tg-slurm",
    "--num-gpus": "8",
    "--region": REGION,
    "--gpu-type": GPU,
    "--billing-type": "SCHEDULED_CAPACITY",
    "--nvidia-driver-version": "570",
    "--cuda-version": "12.8",
    "--os": "ubuntu-22.04",
    "--cluster-type": "SLURM",
    "--no-auto-scale": None,
    "--no-install-traefik": None,
    "--slurm-web-addon": None,
    "--reservation-start-time": "2027-03-01T00:00:00Z",
    "--reservation-end-time": "2027-03-08T00:00:00Z",
    "--slurm-image": "ghcr.io/example/slurm:24.05",
    "--slurm-shm-size-gib": "64",
}


def _args(flags: dict[str, str | None]) -> list[str]:
    return [part for flag, value in flags.items() for part in ((flag,) if value is None else (flag, value))]


def _help_flags(emu: RunningEmulator, home: Path) -> set[str]:
    """Every flag ``tg clusters create --help`` lists (its table cuts long names short: completed below)."""
    proc = _run_tg(emu, home, "clusters", "create", "--help")
    listed = set(re.findall(r"│\s+(--[a-z0-9-]+)", proc.stdout.split("Global Options")[0]))
    return {flag.rstrip("-") for flag in listed}


def _get(emu: RunningEmulator, home: Path, cluster_id: str) -> dict[str, Any]:
    raw = _tg(emu, home, "clusters", "get", cluster_id)
    strict_cluster(raw)  # the SDK's own response type, unknown fields forbidden
    return dict(json.loads(raw))


def test_tg_create_sets_every_flag_and_get_shows_each_as_sent(
    emu: RunningEmulator, http: Any, tmp_path: Path
) -> None:
    assert TG.exists()
    admin = emu.admin
    admin.set_capacity_pool(POOL, REGION, GPU, 16)
    project = strict_whoami(http(KEY).get("/v3/whoami").text).project.id
    volume = strict_volume(
        _tg(
            emu,
            tmp_path,
            "clusters",
            "storage",
            "create",
            "--region",
            REGION,
            "--size-tib",
            "1",
            "--volume-name",
            "tg-data",
        )
    )
    kube_flags = KUBE_FLAGS | {"--volume": volume.volume_id}

    # Every flag of the help is set by one of the two creates (a flag tg gains fails here until it is set).
    every = set(kube_flags) | set(SLURM_FLAGS)
    listed = _help_flags(emu, tmp_path)
    assert {"--name", "--capacity-pool-id", "--slurm-image", "--volume"} <= listed, listed
    assert {f for f in listed if not any(s.startswith(f) for s in every)} == set()

    kube_id = json.loads(_tg(emu, tmp_path, "--project", project, "clusters", "create", *_args(kube_flags)))[
        "cluster_id"
    ]
    slurm_id = json.loads(_tg(emu, tmp_path, "clusters", "create", *_args(SLURM_FLAGS)))["cluster_id"]

    kube = _get(emu, tmp_path, kube_id)
    expected = {
        "cluster_name": "tg-kube",
        "num_gpus": 16,
        "region": REGION,
        "gpu_type": GPU,
        "billing_type": "RESERVED",
        "nvidia_driver_version_id": DRIVER,
        "duration_hours": 30 * 24,
        "cluster_type": "KUBERNETES",
        "capacity_pool_id": POOL,
        "num_capacity_pool_gpus": 8,
        "install_traefik": True,
        "desired_preemptible_gpus": 8,
        "num_reserved_gpus": 16,
        "project_id": project,
    }
    assert {k: kube.get(k) for k in expected} == expected
    assert kube["reservation_start_time"].startswith("2027-01-01T00:00:00")
    assert kube["reservation_end_time"].startswith("2027-02-01T00:00:00")
    assert [v["volume_id"] for v in kube["volumes"]] == [volume.volume_id]
    assert [(a["name"], a["add_on_type"], a["config"]) for a in kube["add_ons"]] == [
        ("headlamp", "headlamp", {"headlamp": {"enabled": True}})
    ]

    slurm = _get(emu, tmp_path, slurm_id)
    expected_slurm = {
        "cluster_name": "tg-slurm",
        "num_gpus": 8,
        "billing_type": "SCHEDULED_CAPACITY",
        "cluster_type": "SLURM",
        # --nvidia-driver-version, --cuda-version and --os: resolved by tg to the catalog's entry.
        "nvidia_driver_version_id": DRIVER,
        "nvidia_driver_version": "570",
        "cuda_version": "12.8",
        "os_image": "ubuntu-22.04",
        "install_traefik": False,
        "slurm_shm_size_gib": 64,
    }
    assert {k: slurm.get(k) for k in expected_slurm} == expected_slurm
    assert slurm["reservation_start_time"].startswith("2027-03-01T00:00:00")
    assert [(a["name"], a["config"]) for a in slurm["add_ons"]] == [
        ("slurm_web", {"slurm_web": {"enabled": True}})
    ]

    # What the response type does not carry reached the emulator as fields the API defines ...
    assert admin.ignored_fields() == []
    # ... and the autoscaling settings are kept as sent (the admin API's view; the reply has no such field).
    kept = {c["cluster_id"]: c for c in admin.clusters()}
    assert set(kept) == {kube_id, slurm_id}
    assert (
        admin.set_demand(kube_id, 0)["auto_scale"],
        admin.set_demand(kube_id, 0)["auto_scale_max_gpus"],
    ) == (
        True,
        32,
    )
    assert admin.set_demand(slurm_id, 0)["auto_scale"] is False
    assert admin.capacity_pools()[0]["drawn_gpus"] == 8
