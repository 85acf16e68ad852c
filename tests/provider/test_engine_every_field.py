"""Every field of the official SDK's create, set by a Pulumi program through the real engine (issue 42).

Two clusters cover the 28 fields between them (a Kubernetes one and a Slurm one: some fields belong to one
type only), with the nested inputs as their typed dataclasses. The oracles are nobody's code here: the
official ``tg clusters get`` shows each field as sent (those the API's reply carries), and the emulator's
record of fields it ignored stays empty (every field the provider sent is one the API defines). Then a
preview and a refresh find nothing to change, and a destroy leaves nothing behind.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests import _engine
from tests.emulator.test_tg_cli import _tg
from together_clusters.emulator.server import RunningEmulator
from together_clusters.provider.client import TogetherClient

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "key-tg-cli"  # tg's key in tests/emulator/test_tg_cli.py: the same owner sees the clusters
POOL = "pool-reserved-a"

PROGRAM = textwrap.dedent(
    """
    import pulumi

    from together_clusters.provider import (
        AcceptanceTestsArgs,
        AddOnArgs,
        AddOnConfigArgs,
        Cluster,
        ClusterArgs,
        ClusterConfigArgs,
        EnabledFlagArgs,
        OidcConfigArgs,
        SharedVolumeArgs,
        SlurmStartupScriptsArgs,
        Volume,
        VolumeArgs,
    )

    config = pulumi.Config()
    project = config.require("projectId")
    kube = Cluster(
        "kube",
        ClusterArgs(
            cluster_name="every-field-kube",
            region="us-central-8",
            gpu_type="H100_SXM",
            num_gpus=16,
            num_preemptible_gpus=8,
            billing_type="RESERVED",
            cluster_type="KUBERNETES",
            project_id=project,
            nvidia_version_id="nv-570-cu128-ubuntu2204",
            cuda_version="12.8",
            nvidia_driver_version="570",
            shared_volume=SharedVolumeArgs(
                volume_name="every-field-inline", region="us-central-8", size_tib=2, is_lifecycle_independent=True
            ),
            cluster_config=ClusterConfigArgs(
                load_balancer="TRAEFIK",
                ingress=EnabledFlagArgs(enabled=True),
                observability=EnabledFlagArgs(enabled=True),
                kubernetes_dashboard_enabled=True,
            ),
            add_ons=[
                AddOnArgs(
                    name="lamp", add_on_type="headlamp", config=AddOnConfigArgs(headlamp=EnabledFlagArgs(enabled=True))
                )
            ],
            num_reserved_gpus=16,
            duration_days=30,
            reservation_start_time="2026-01-01T00:00:00Z",
            reservation_end_time="2030-01-01T00:00:00Z",
            ready_timeout_minutes=5,
            auto_scale=True,
            auto_scale_max_gpus=32,
            capacity_pool_id="POOL",
            num_capacity_pool_gpus=8,
            oidc_config=OidcConfigArgs(
                issuer_url="https://issuer.example",
                client_id="kubernetes",
                username_claim="email",
                username_prefix="oidc:",
                group_claim="groups",
                group_prefix="oidc:",
            ),
            acceptance_tests_params=AcceptanceTestsArgs(enabled=True, dcgm_diag_level="DCGM_DIAG_LEVEL_SHORT"),
            install_traefik=True,
        ),
    )
    data = Volume("data", VolumeArgs(volume_name="every-field-data", region="us-central-8", size_tib=1,
                                     allow_data_loss=True))
    slurm = Cluster(
        "slurm",
        ClusterArgs(
            cluster_name="every-field-slurm",
            region="us-central-8",
            gpu_type="H100_SXM",
            num_gpus=8,
            cluster_type="SLURM",
            cuda_version="12.8",
            nvidia_driver_version="570",
            volume_id=data.volume_id,
            slurm_shm_size_gib=64,
            slurm_image="ghcr.io/example/slurm:24.05",
            cluster_config=ClusterConfigArgs(
                load_balancer="NONE", slurm_startup_scripts=SlurmStartupScriptsArgs(worker_prolog="echo hi")
            ),
            ready_timeout_minutes=5,
        ),
    )
    pulumi.export("kube", kube.cluster_id)
    pulumi.export("slurm", slurm.cluster_id)
    """
).replace('"POOL"', repr(POOL))


@pytest.fixture(scope="module")
def stack(emu: RunningEmulator, tmp_path_factory: pytest.TempPathFactory) -> _engine.ProjectStack:
    workdir = tmp_path_factory.mktemp("every-field")
    stack = _engine.ProjectStack()
    stack.dir = workdir / "project"
    stack.dir.mkdir()
    pulumi_yaml = re.sub(r"(?m)^main: .*\n", "", (ROOT / "Pulumi.yaml").read_text())
    (stack.dir / "Pulumi.yaml").write_text(pulumi_yaml)
    (stack.dir / "__main__.py").write_text(PROGRAM)
    stack.env = _engine.engine_env(
        workdir, extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": API_KEY}
    )
    stack.run("stack", "init", "test", check=True)
    with TogetherClient(api_key=API_KEY, base_url=emu.base_url) as client:
        stack.config("projectId", client.whoami().project_id)
    emu.admin.set_capacity_pool(POOL, "us-central-8", "H100_SXM", 16)
    emu.admin.clear_ignored_fields()
    return stack


def _get(emu: RunningEmulator, home: Path, cluster_id: str) -> dict[str, Any]:
    return dict(json.loads(_tg(emu, home, "clusters", "get", cluster_id)))


def test_a_stack_sets_every_field_and_tg_shows_each_as_sent(
    stack: _engine.ProjectStack, emu: RunningEmulator, tmp_path: Path
) -> None:
    up = stack.run("up", *_engine.UP_FLAGS)
    assert up.returncode == 0, _engine.output(up)
    outs = stack.outputs()

    kube = _get(emu, tmp_path, outs["kube"])
    expected = {
        "cluster_name": "every-field-kube",
        "region": "us-central-8",
        "gpu_type": "H100_SXM",
        "num_gpus": 16,
        "desired_preemptible_gpus": 8,
        "billing_type": "RESERVED",
        "cluster_type": "KUBERNETES",
        "nvidia_driver_version_id": "nv-570-cu128-ubuntu2204",
        "cuda_version": "12.8",
        "nvidia_driver_version": "570",
        "num_reserved_gpus": 16,
        "duration_hours": 30 * 24,
        "capacity_pool_id": POOL,
        "num_capacity_pool_gpus": 8,
        "install_traefik": True,
    }
    assert {k: kube.get(k) for k in expected} == expected
    assert kube["reservation_start_time"].startswith("2026-01-01T00:00:00")
    assert kube["reservation_end_time"].startswith("2030-01-01T00:00:00")
    assert [v["volume_name"] for v in kube["volumes"]] == ["every-field-inline"]
    assert kube["cluster_config"]["load_balancer"] == "TRAEFIK"
    assert kube["cluster_config"]["ingress"] == {"enabled": True}
    assert kube["cluster_config"]["kubernetes_dashboard_enabled"] is True
    assert [(a["name"], a["add_on_type"], a["config"]["headlamp"]) for a in kube["add_ons"]] == [
        ("lamp", "headlamp", {"enabled": True})
    ]
    assert kube["oidc_config"]["issuer_url"] == "https://issuer.example"
    assert kube["oidc_config"]["group_prefix"] == "oidc:"

    slurm = _get(emu, tmp_path, outs["slurm"])
    assert (slurm["cluster_type"], slurm["slurm_shm_size_gib"]) == ("SLURM", 64)
    assert [v["volume_name"] for v in slurm["volumes"]] == ["every-field-data"]
    assert slurm["cluster_config"]["slurm_startup_scripts"] == {"worker_prolog": "echo hi"}

    # The fields the reply does not carry (auto_scale, auto_scale_max_gpus, acceptance_tests_params,
    # slurm_image) reached the API as fields it defines: the emulator ignored none of what was sent.
    assert emu.admin.ignored_fields() == []


def test_the_next_preview_and_refresh_change_nothing(stack: _engine.ProjectStack) -> None:
    preview = stack.run("preview", *_engine.PREVIEW_FLAGS, "--expect-no-changes")
    assert preview.returncode == 0, _engine.output(preview)
    refresh = stack.run("refresh", *_engine.UP_FLAGS, "--expect-no-changes")
    assert refresh.returncode == 0, _engine.output(refresh)


def test_destroy_leaves_no_cluster_and_frees_the_pool(
    stack: _engine.ProjectStack, emu: RunningEmulator
) -> None:
    destroy = stack.run("destroy", *_engine.UP_FLAGS)
    assert destroy.returncode == 0, _engine.output(destroy)
    with TogetherClient(api_key=API_KEY, base_url=emu.base_url) as client:
        names = {c.cluster_name for c in client.list_clusters() if c.status != "Deleting"}
    assert not names & {"every-field-kube", "every-field-slurm"}
    (pool,) = [p for p in emu.admin.capacity_pools() if p["pool_id"] == POOL]
    assert pool["drawn_gpus"] == 0, pool
