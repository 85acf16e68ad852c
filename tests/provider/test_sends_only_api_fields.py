"""Our own client never sends a field the API does not define (issue 42, part 5).

The emulator accepts and ignores such fields, as the real API's gateway does (docs/guides/emulator-and-twin.md),
so leniency could hide a mistake of ours: a field added to our request models or the field table that the API
does not know would be dropped in silence, and the setting with it. Here every create and update field the
provider supports is sent through the client and through the provider's operations, and the emulator's record
of ignored fields must stay empty. Each test first checks that it sets every field our side has, so a field
added there fails here until it is given a value, and then the emulator names it if the API does not define it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.server import RunningEmulator
from together_clusters.provider import settings
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.models import (
    AcceptanceTestsParams,
    AddOnConfig,
    AddOnSpec,
    AddOnUpdate,
    ClusterConfigSpec,
    ClusterCreateRequest,
    ClusterUpdateRequest,
    EnabledFlag,
    OidcConfigSpec,
    SharedVolumeSpec,
    SlurmStartupScripts,
    StorageCreateRequest,
)
from together_clusters.provider.resource import ClusterProvider, VolumeProvider, forget_catalog
from together_clusters.provider.schema import FIELDS, VOLUME_FIELDS, OnChange

from .conftest import cluster_inputs

KEY = "sends-only-api-fields"
REGION = "us-central-8"
GPU = "H100_SXM"
POOL = "pool-sends-only"


@pytest.fixture
def admin(emu: RunningEmulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[AdminClient]:
    monkeypatch.setenv("TOGETHER_BASE_URL", emu.base_url)
    monkeypatch.setenv("TOGETHER_API_KEY", KEY)
    emu.admin.reset()
    emu.admin.set_speed(600)
    emu.admin.set_capacity_pool(POOL, REGION, GPU, 32)
    settings.forget_clients()
    forget_catalog()
    yield emu.admin
    emu.admin.clear_faults()


@pytest.fixture
def client(emu: RunningEmulator, admin: AdminClient) -> Iterator[TogetherClient]:
    with TogetherClient(api_key=KEY, base_url=emu.base_url) as made:
        yield made


def _set_fields(*requests: Any) -> set[str]:
    return {name for request in requests for name in request.model_fields_set}


def _oidc() -> dict[str, str]:
    return {
        "issuer_url": "https://issuer.example",
        "client_id": "kubernetes",
        "username_claim": "email",
        "username_prefix": "oidc:",
        "group_claim": "groups",
        "group_prefix": "oidc:",
        "ca_cert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    }


def _acceptance_tests() -> dict[str, Any]:
    return {
        "enabled": True,
        "dcgm_diag_level": "DCGM_DIAG_LEVEL_SHORT",
        "dcgm_diag_skipped": False,
        "gpu_burn_duration": 60,
        "gpu_burn_skipped": False,
        "nccl_multi_node_skipped": True,
        "nccl_single_node_skipped": False,
        "storage_skipped": False,
    }


def _cluster_config(**more: Any) -> ClusterConfigSpec:
    return ClusterConfigSpec(
        load_balancer="TRAEFIK",
        gpu_operator_version="v25.3.0",
        ingress=EnabledFlag(enabled=True),
        jumphost_enabled=False,
        kubernetes_dashboard_enabled=True,
        network_operator_version="v25.1.0",
        observability=EnabledFlag(enabled=True),
        ssh_ca_enabled=False,
        **more,
    )


def test_the_clients_every_create_and_update_field_is_one_the_api_defines(
    client: TogetherClient, admin: AdminClient
) -> None:
    project = client.whoami().project_id
    volume_request = StorageCreateRequest(
        region=REGION, size_tib=1, volume_name="attached", is_lifecycle_independent=True, project_id=project
    )
    volume = client.create_volume(volume_request)
    kube_request = ClusterCreateRequest(
        cluster_name="every-field-kube",
        region=REGION,
        gpu_type=GPU,
        num_gpus=16,
        billing_type="RESERVED",
        cluster_type="KUBERNETES",
        project_id=project,
        nvidia_version_id="nv-570-cu128-ubuntu2204",
        cuda_version="12.8",
        nvidia_driver_version="570",
        acceptance_tests_params=AcceptanceTestsParams.model_validate(_acceptance_tests()),
        add_ons=[
            AddOnSpec(
                add_on_type="headlamp",
                name="lamp",
                config=AddOnConfig(headlamp=EnabledFlag(enabled=True)),
            )
        ],
        auto_scale=True,
        auto_scale_max_gpus=32,
        capacity_pool_id=POOL,
        num_capacity_pool_gpus=8,
        cluster_config=_cluster_config(),
        duration_days=30,
        install_traefik=True,
        num_preemptible_gpus=8,
        num_reserved_gpus=16,
        oidc_config=OidcConfigSpec.model_validate(_oidc()),
        reservation_start_time=datetime(2026, 1, 1, tzinfo=UTC),
        reservation_end_time=datetime(2030, 1, 1, tzinfo=UTC),
        shared_volume=SharedVolumeSpec(
            region=REGION,
            size_tib=2,
            volume_name="inline",
            instance_cluster_id=None,
            is_lifecycle_independent=True,
            project_id=project,
        ),
    )
    first = client.create_cluster(kube_request)
    slurm_request = ClusterCreateRequest(
        cluster_name="every-field-slurm",
        region=REGION,
        gpu_type=GPU,
        num_gpus=8,
        billing_type="ON_DEMAND",
        cluster_type="SLURM",
        nvidia_version_id="nv-570-cu128-ubuntu2204",
        slurm_shm_size_gib=64,
        slurm_image="ghcr.io/example/slurm:24.05",
        volume_id=volume.volume_id,
        cluster_config=ClusterConfigSpec(
            load_balancer="NONE", slurm_startup_scripts=SlurmStartupScripts(worker_prolog="echo hi")
        ),
    )
    client.create_cluster(slurm_request)
    update = ClusterUpdateRequest(
        add_ons=[AddOnUpdate(name="lamp", config=AddOnConfig(headlamp=EnabledFlag(enabled=False)))],
        cluster_config=_cluster_config(),
        cluster_type="KUBERNETES",
        num_capacity_pool_gpus=16,
        num_gpus=24,
        num_preemptible_gpus=16,
        num_reserved_gpus=24,
        reservation_end_time=datetime(2031, 1, 1, tzinfo=UTC),
    )
    updated = client.update_cluster(str(first.cluster_id), update)
    client.resize_volume(volume.volume_id, 2)

    assert updated.num_capacity_pool_gpus == 16 and updated.num_gpus == 24
    # Every field our request models have was sent (a new one fails here until it is given a value) ...
    assert _set_fields(kube_request, slurm_request) == set(ClusterCreateRequest.model_fields)
    assert _set_fields(update) == set(ClusterUpdateRequest.model_fields)
    # instance_cluster_id places a volume beside a cluster: set below, on the resize's volume, it would need one.
    assert _set_fields(volume_request) | {"instance_cluster_id"} == set(StorageCreateRequest.model_fields)
    # ... and the API defines each: the emulator ignored nothing.
    assert admin.ignored_fields() == []


def test_a_field_the_api_does_not_define_would_be_caught(client: TogetherClient, admin: AdminClient) -> None:
    """The sanity check: were our create model to grow a field the API lacks, the record names it."""

    class WithAnExtraField(ClusterCreateRequest):
        auto_scaled: bool | None = None  # deprecated: the API no longer defines it

    request = WithAnExtraField(
        cluster_name="extra",
        region=REGION,
        gpu_type=GPU,
        num_gpus=8,
        billing_type="ON_DEMAND",
        nvidia_version_id="nv-570-cu128-ubuntu2204",
        auto_scaled=False,
    )
    client.create_cluster(request)
    assert admin.ignored_fields() == [
        {"method": "POST", "route": "/v1/compute/clusters", "fields": ["auto_scaled"]}
    ]


def _checked(provider: Any, olds: dict[str, Any], news: dict[str, Any]) -> dict[str, Any]:
    result = provider.check(olds, news)
    assert not result.failures, result.failures
    return dict(result.inputs)


def test_the_providers_every_create_and_update_field_is_one_the_api_defines(
    client: TogetherClient, admin: AdminClient
) -> None:
    volumes = VolumeProvider()
    volume_news = {
        "volume_name": "data",
        "region": REGION,
        "size_tib": 1,
        "is_lifecycle_independent": True,
        "allow_data_loss": True,
    }
    volume = volumes.create(_checked(volumes, {}, volume_news))
    kube_news = cluster_inputs(
        "every-field-kube",
        num_gpus=16,
        num_preemptible_gpus=8,
        billing_type="RESERVED",
        cluster_type="KUBERNETES",
        project_id=client.whoami().project_id,
        cuda_version="12.8",
        nvidia_driver_version="570",
        shared_volume={
            "volume_name": "inline",
            "region": REGION,
            "size_tib": 2,
            "is_lifecycle_independent": True,
        },
        cluster_config={
            "load_balancer": "TRAEFIK",
            "ingress": {"enabled": True},
            "kubernetes_dashboard_enabled": True,
        },
        add_ons=[{"name": "lamp", "add_on_type": "headlamp", "config": {"headlamp": {"enabled": True}}}],
        num_reserved_gpus=16,
        duration_days=30,
        reservation_start_time="2026-01-01T00:00:00Z",
        reservation_end_time="2030-01-01T00:00:00Z",
        auto_scale=True,
        auto_scale_max_gpus=32,
        capacity_pool_id=POOL,
        num_capacity_pool_gpus=8,
        oidc_config={k: v for k, v in _oidc().items() if k != "ca_cert"},
        acceptance_tests_params={"enabled": True, "dcgm_diag_level": "DCGM_DIAG_LEVEL_SHORT"},
        install_traefik=True,
    )
    slurm_news = cluster_inputs(
        "every-field-slurm",
        num_preemptible_gpus=0,
        cluster_type="SLURM",
        volume_id=volume.id,
        slurm_shm_size_gib=64,
        slurm_image="ghcr.io/example/slurm:24.05",
        cluster_config={"load_balancer": "NONE", "slurm_startup_scripts": {"worker_prolog": "echo hi"}},
    )
    clusters = ClusterProvider()
    kube_inputs = _checked(clusters, {}, kube_news)
    kube = clusters.create(kube_inputs)
    clusters.create(_checked(clusters, {}, slurm_news))
    # Every field the Cluster sends on create is set by one of the two (a new one fails here) ...
    sent_on_create = {n for n, s in FIELDS.items() if s.on_change.sent_on_create and n != "adopt_cluster_id"}
    assert sent_on_create - set(kube_news) - set(slurm_news) == set()

    changes = {
        "num_gpus": 24,
        "num_preemptible_gpus": 16,
        "num_reserved_gpus": 24,
        "num_capacity_pool_gpus": 16,
        "reservation_end_time": "2031-01-01T00:00:00Z",
        "cluster_config": kube_news["cluster_config"] | {"kubernetes_dashboard_enabled": False},
        "add_ons": [{"name": "lamp", "add_on_type": "headlamp", "config": {"headlamp": {"enabled": False}}}],
    }
    # ... and every field it changes in place is changed here.
    assert {n for n, s in FIELDS.items() if s.on_change is OnChange.UPDATE} == set(changes)
    news = _checked(clusters, kube.outs, kube_news | changes)
    diff = clusters.diff(kube.id, kube.outs, news)
    assert diff.changes and not diff.replaces, (diff.changes, diff.replaces)
    updated = clusters.update(kube.id, kube.outs, news).outs
    assert (updated["num_gpus"], updated["num_capacity_pool_gpus"]) == (24, 16)
    live = client.get_cluster(kube.id)
    assert (live.num_reserved_gpus, live.desired_preemptible_gpus) == (24, 16)
    assert live.reservation_end_time is not None and live.reservation_end_time.year == 2031
    assert live.cluster_config is not None and live.cluster_config.kubernetes_dashboard_enabled is False

    grown = _checked(volumes, volume.outs, volume_news | {"size_tib": 2})
    assert {n for n, s in VOLUME_FIELDS.items() if s.on_change is OnChange.UPDATE} == {"size_tib"}
    volumes.update(volume.id, volume.outs, grown)
    # Every field sent was one the API defines: the emulator ignored nothing.
    assert admin.ignored_fields() == []
