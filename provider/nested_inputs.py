"""The Cluster's nested inputs as typed dataclasses, shaped as the API's request objects (the official SDK's
``cluster_create_params``), so a type checker and an IDE see each key; nested as pulumi-kubernetes nests its
args: ``ClusterArgs(oidc_config=OidcConfigArgs(issuer_url=..., ...))``.

A plain dict of the same shape is still accepted wherever one of these is (stacks written before they
existed pass dicts): :func:`wire_form` turns either into the dict the state records and the API receives,
with unset keys left out. Values may be Pulumi inputs (an ``Output`` of another resource): the conversion
does not copy or inspect them, it only unwraps the dataclasses around them.

Each field name here is the API's; ``tests/provider/test_sdk_coverage.py`` holds them to the SDK's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pulumi

from .vocabulary import DcgmDiagLevel, LoadBalancer


@dataclasses.dataclass(frozen=True)
class EnabledFlagArgs:
    """A part of the cluster or of an add-on that is switched on or off."""

    enabled: pulumi.Input[bool] | None = None


@dataclasses.dataclass(frozen=True)
class OidcConfigArgs:
    """Sign in to the cluster's Kubernetes API with an OIDC issuer (every key but ``ca_cert`` is required)."""

    issuer_url: pulumi.Input[str]
    client_id: pulumi.Input[str]
    username_claim: pulumi.Input[str]
    username_prefix: pulumi.Input[str]
    group_claim: pulumi.Input[str]
    group_prefix: pulumi.Input[str]
    ca_cert: pulumi.Input[str] | None = None
    """The issuer's CA in PEM, when it is private or self-signed."""


@dataclasses.dataclass(frozen=True)
class AcceptanceTestsArgs:
    """The GPU acceptance tests run while the cluster is brought up (``enabled`` turns them on)."""

    enabled: pulumi.Input[bool] | None = None
    dcgm_diag_level: pulumi.Input[DcgmDiagLevel] | None = None
    """DCGM's depth; MEDIUM when enabled and unset."""
    dcgm_diag_skipped: pulumi.Input[bool] | None = None
    gpu_burn_duration: pulumi.Input[int] | None = None
    """Seconds; 0 means the platform's default."""
    gpu_burn_skipped: pulumi.Input[bool] | None = None
    nccl_multi_node_skipped: pulumi.Input[bool] | None = None
    nccl_single_node_skipped: pulumi.Input[bool] | None = None
    storage_skipped: pulumi.Input[bool] | None = None


@dataclasses.dataclass(frozen=True)
class SlurmStartupScriptsArgs:
    """Slurm lifecycle scripts (prolog, epilog, init, extra ``slurm.conf``)."""

    controller_epilog: pulumi.Input[str] | None = None
    controller_prolog: pulumi.Input[str] | None = None
    extra_slurm_conf: pulumi.Input[str] | None = None
    login_init_script: pulumi.Input[str] | None = None
    nodeset_init_script: pulumi.Input[str] | None = None
    worker_epilog: pulumi.Input[str] | None = None
    worker_prolog: pulumi.Input[str] | None = None


@dataclasses.dataclass(frozen=True)
class ClusterConfigArgs:
    """The cluster's platform configuration, changed in place (``load_balancer`` is required)."""

    load_balancer: pulumi.Input[LoadBalancer]
    gpu_operator_version: pulumi.Input[str] | None = None
    ingress: EnabledFlagArgs | None = None
    jumphost_enabled: pulumi.Input[bool] | None = None
    kubernetes_dashboard_enabled: pulumi.Input[bool] | None = None
    network_operator_version: pulumi.Input[str] | None = None
    observability: EnabledFlagArgs | None = None
    slurm_startup_scripts: SlurmStartupScriptsArgs | None = None
    ssh_ca_enabled: pulumi.Input[bool] | None = None


@dataclasses.dataclass(frozen=True)
class AddOnConfigArgs:
    """Which parts of an add-on are on."""

    dashboard: EnabledFlagArgs | None = None
    headlamp: EnabledFlagArgs | None = None
    ingress: EnabledFlagArgs | None = None
    slurm_web: EnabledFlagArgs | None = None


@dataclasses.dataclass(frozen=True)
class AddOnArgs:
    """An add-on, found by ``name``: its config changes in place; adding or removing one replaces the cluster."""

    name: pulumi.Input[str]
    add_on_type: pulumi.Input[str]
    config: AddOnConfigArgs | None = None


@dataclasses.dataclass(frozen=True)
class SharedVolumeArgs:
    """A shared volume created with the cluster (prefer a ``Volume`` resource, attached by ``volume_id``)."""

    volume_name: pulumi.Input[str]
    region: pulumi.Input[str]
    size_tib: pulumi.Input[int]
    is_lifecycle_independent: pulumi.Input[bool] | None = None
    instance_cluster_id: pulumi.Input[str] | None = None
    project_id: pulumi.Input[str] | None = None


NESTED_ARGS: dict[str, type] = {
    "oidc_config": OidcConfigArgs,
    "acceptance_tests_params": AcceptanceTestsArgs,
    "cluster_config": ClusterConfigArgs,
    "add_ons": AddOnArgs,
    "shared_volume": SharedVolumeArgs,
}
"""The Cluster inputs given as one of these dataclasses (``add_ons``: a list of them)."""


def wire_form(value: Any) -> Any:
    """``value`` with every dataclass above turned into its dict, unset keys left out; anything else as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: wire_form(item)
            for f in dataclasses.fields(value)
            if (item := getattr(value, f.name)) is not None
        }
    if isinstance(value, list | tuple):
        return [wire_form(item) for item in value]
    if isinstance(value, dict):
        return {key: wire_form(item) for key, item in value.items()}
    return value
