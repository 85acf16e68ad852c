"""The ``Cluster`` Pulumi resource and its dynamic provider: glue between the engine, the rules and
the client.

Stability promise: the engine pickles ``ClusterProvider`` into the state by reference, as
``together_clusters.provider.resource.ClusterProvider``, and records the type
``pulumi-python:dynamic/together_clusters:Cluster`` (and likewise ``VolumeProvider`` and
``pulumi-python:dynamic/together_clusters:Volume``). Both names changed once, before the first release,
when the distribution moved into one import namespace; from then on they stay as they are in every
release, so state written today still refreshes and destroys later. The provider object carries no
attributes: the API key is read per call.

This module is what a Pulumi program imports: pulumi and the schema only. What the provider's calls do
lives in ``planning`` (configure, check, diff) and ``operations`` (create, read, update, delete), loaded
by the provider host on the first call that needs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from types import ModuleType
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)

from . import run_errors
from .nested_inputs import (
    AcceptanceTestsArgs,
    AddOnArgs,
    ClusterConfigArgs,
    OidcConfigArgs,
    SharedVolumeArgs,
    wire_form,
)
from .schema import (
    FIELDS,
    OUTPUT_NAMES,
    RESOURCE_MODULE,
    RESOURCE_NAME,
    SECRET_OUTPUTS,
    VOLUME_FIELDS,
    VOLUME_OUTPUT_NAMES,
    VOLUME_RESOURCE_NAME,
)

# A refused input in the program is reported as its one line, as Pulumi reports a RunError (see run_errors).
run_errors.install()


# What the calls do is imported on the first call, in the provider host: the program that declares
# clusters never loads the rules, and a preview never loads the HTTP client unless it needs the catalog.
def _planning() -> ModuleType:
    from . import oneline, planning

    oneline.install()
    return planning


def _operations() -> ModuleType:
    from . import oneline, operations

    oneline.install()
    return operations


def forget_catalog() -> None:
    """Drop the cached region catalog, as a new provider process would (for tests)."""
    _planning().forget_catalog()


def _given(args: object | None) -> dict[str, Any]:
    """The fields of an args dataclass that are set, nested args in their wire form: not ``asdict``, which
    deep-copies every value and fails on an ``Output`` (``ClusterArgs(volume_id=volume.volume_id)``)."""
    if args is None:
        return {}
    return {f.name: wire_form(v) for f in fields(args) if (v := getattr(args, f.name)) is not None}  # type: ignore[arg-type]


class ClusterProvider(ResourceProvider):
    """CRUD for Together GPU clusters. Holds no state of its own (it is pickled into the stack)."""

    serialize_as_secret_always = False

    def configure(self, req: ConfigureRequest) -> None:
        _planning().configure(req)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return _planning().check(olds, news)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return _planning().diff(id_, olds, news)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return _operations().create(props)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return _operations().read(id_, props)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return _operations().update(id_, olds, news)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        _operations().delete(id_, props)


@dataclass
class ClusterArgs:
    """Inputs of a :class:`Cluster`, named as in the Together API.

    The code owns these desired values; the platform owns the live ones, which are outputs.
    ``num_gpus`` is the standard (on-demand) GPU count and must be at least 8 (one standard node);
    ``num_preemptible_gpus`` is the preemptible target, filled as capacity allows.

    Every field of the official SDK's create is here (``tests/provider/test_sdk_coverage.py`` holds them to
    it). ``auto_scale`` with ``auto_scale_max_gpus`` lets the platform grow the standard nodes under load and
    shrink them back: ``num_gpus`` is then the floor, and the platform's own scaling is never drift.
    ``capacity_pool_id`` with ``num_capacity_pool_gpus`` draws GPUs from a reserved pool. The nested inputs
    take the dataclasses of :mod:`.nested_inputs` (``OidcConfigArgs``, ``AcceptanceTestsArgs``,
    ``ClusterConfigArgs``, ``AddOnArgs``, ``SharedVolumeArgs``) or dicts of the same shape.

    Written out by hand so that a type checker and an IDE see each field; ``provider/schema.py``
    (``FIELDS``) is the list they follow, with the same order, required fields and defaults (a test holds
    them together). ``None`` means the schema's default.
    """

    cluster_name: pulumi.Input[str]
    region: pulumi.Input[str]
    gpu_type: pulumi.Input[str]
    num_gpus: pulumi.Input[int]
    num_preemptible_gpus: pulumi.Input[int] | None = 0
    billing_type: pulumi.Input[str] | None = "ON_DEMAND"
    cluster_type: pulumi.Input[str] | None = "KUBERNETES"
    project_id: pulumi.Input[str] | None = None
    nvidia_version_id: pulumi.Input[str] | None = None
    cuda_version: pulumi.Input[str] | None = None
    nvidia_driver_version: pulumi.Input[str] | None = None
    shared_volume: SharedVolumeArgs | pulumi.Input[dict[str, Any]] | None = None
    volume_id: pulumi.Input[str] | None = None
    cluster_config: ClusterConfigArgs | pulumi.Input[dict[str, Any]] | None = None
    add_ons: Sequence[AddOnArgs | pulumi.Input[dict[str, Any]]] | None = None
    num_reserved_gpus: pulumi.Input[int] | None = None
    duration_days: pulumi.Input[int] | None = None
    reservation_start_time: pulumi.Input[str] | None = None
    reservation_end_time: pulumi.Input[str] | None = None
    slurm_shm_size_gib: pulumi.Input[int] | None = None
    ready_timeout_minutes: pulumi.Input[float] | None = 60
    allow_data_loss: bool | None = False  # a plain bool: it decides `protect` when the program runs
    adopt_cluster_id: pulumi.Input[str] | None = None
    auto_scale: pulumi.Input[bool] | None = None
    auto_scale_max_gpus: pulumi.Input[int] | None = None
    capacity_pool_id: pulumi.Input[str] | None = None
    num_capacity_pool_gpus: pulumi.Input[int] | None = None
    oidc_config: OidcConfigArgs | pulumi.Input[dict[str, Any]] | None = None
    acceptance_tests_params: AcceptanceTestsArgs | pulumi.Input[dict[str, Any]] | None = None
    install_traefik: pulumi.Input[bool] | None = None
    slurm_image: pulumi.Input[str] | None = None


class Cluster(Resource, module=RESOURCE_MODULE, name=RESOURCE_NAME):
    """A Together GPU cluster with standard and preemptible capacity.

    Outputs: ``cluster_id`` (also the resource id), ``status``, ``phase``,
    ``desired_preemptible_gpus``, ``allocated_preemptible_gpus``, ``preemptible_shortfall_gpus``,
    ``standard_nodes``, ``preemptible_nodes``, ``recent_preemptions``, ``last_preempted_at``,
    ``kube_config`` (secret), ``created_at``, and where the cluster lives: ``api_endpoint``,
    ``api_project_id`` and ``api_organization_id`` (refresh, update and delete refuse another endpoint or
    project); plus every input. The annotations follow ``OUTPUT_NAMES`` in ``provider/schema.py``.
    """

    cluster_id: pulumi.Output[str]
    status: pulumi.Output[str]
    phase: pulumi.Output[str]
    desired_preemptible_gpus: pulumi.Output[int]
    allocated_preemptible_gpus: pulumi.Output[int]
    preemptible_shortfall_gpus: pulumi.Output[int]
    standard_nodes: pulumi.Output[int]
    preemptible_nodes: pulumi.Output[int]
    recent_preemptions: pulumi.Output[int]
    last_preempted_at: pulumi.Output[str | None]
    kube_config: pulumi.Output[str]
    created_at: pulumi.Output[str]
    api_endpoint: pulumi.Output[str]
    api_project_id: pulumi.Output[str | None]
    api_organization_id: pulumi.Output[str | None]
    num_gpus: pulumi.Output[int]
    num_preemptible_gpus: pulumi.Output[int]

    def __init__(
        self,
        resource_name: str,
        args: ClusterArgs | None = None,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        props: dict[str, Any] = _given(args)
        unknown = set(kwargs) - set(FIELDS)
        if unknown:
            raise TypeError(
                f"Cluster got unknown arguments {sorted(unknown)}; the inputs are {', '.join(FIELDS)}"
            )
        props.update({k: wire_form(v) for k, v in kwargs.items() if v is not None})
        for name in FIELDS:
            props.setdefault(name, None)
        for name in OUTPUT_NAMES:
            props.setdefault(name, None)
        secret_opts = pulumi.ResourceOptions(additional_secret_outputs=list(SECRET_OUTPUTS))
        own_opts = pulumi.ResourceOptions.merge(secret_opts, _keep_inline_volume(resource_name, props))
        super().__init__(
            ClusterProvider(), resource_name, props, pulumi.ResourceOptions.merge(own_opts, opts)
        )


def _keep_inline_volume(resource_name: str, props: dict[str, Any]) -> pulumi.ResourceOptions:
    """Protect a cluster whose inline volume would be deleted with it, unless the code allows it.

    A dynamic provider is not asked before a delete, so the engine's protection is what refuses
    ``pulumi destroy`` (or dropping the cluster from the program) at preview; a replacement is refused
    by the rules with the ways out. ``protect=False`` in ``opts`` overrides this.
    """
    if not isinstance(props.get("shared_volume"), dict) or props.get("allow_data_loss") is True:
        return pulumi.ResourceOptions()
    from .change_planning import inline_volume_at_risk

    volume_name = inline_volume_at_risk(props)
    if volume_name is None:
        return pulumi.ResourceOptions()
    pulumi.log.warn(
        f"Cluster {resource_name}: its inline shared_volume {volume_name!r} is not lifecycle-independent, so "
        "deleting or replacing the cluster would delete the volume and every checkpoint on it. The cluster "
        "is protected until the code sets allow_data_loss=True; or keep the data on a Volume resource "
        "(volume_id), or create the volume with is_lifecycle_independent=True."
    )
    return pulumi.ResourceOptions(protect=True)


def _volume_operations() -> ModuleType:
    from . import volume_operations

    return volume_operations


class VolumeProvider(ResourceProvider):
    """CRUD for Together shared volumes. Holds no state of its own (it is pickled into the stack)."""

    serialize_as_secret_always = False

    def configure(self, req: ConfigureRequest) -> None:
        _planning().configure(req)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return _volume_operations().check(olds, news)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return _volume_operations().diff(id_, olds, news)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return _volume_operations().create(props)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return _volume_operations().read(id_, props)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return _volume_operations().update(id_, olds, news)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        _volume_operations().delete(id_, props)


@dataclass
class VolumeArgs:
    """Inputs of a :class:`Volume`, named as in the Together storage API.

    ``size_tib`` grows in place (a shrink is refused at preview). ``is_lifecycle_independent`` defaults
    to True: the volume outlives any cluster that uses it, so a replaced cluster gets its data back.
    ``allow_data_loss`` (ours, never sent) lets a plan replace the volume, and ``pulumi destroy`` delete
    it; without it a replacement is refused at preview and a destroy leaves the volume (retained).
    """

    volume_name: pulumi.Input[str]
    region: pulumi.Input[str]
    size_tib: pulumi.Input[int]
    is_lifecycle_independent: pulumi.Input[bool] | None = None
    project_id: pulumi.Input[str] | None = None
    instance_cluster_id: pulumi.Input[str] | None = None
    allow_data_loss: bool | None = False  # a plain bool: it decides `protect` when the program runs
    adopt_volume_id: pulumi.Input[str] | None = None


class Volume(Resource, module=RESOURCE_MODULE, name=VOLUME_RESOURCE_NAME):
    """A Together shared volume, for ``Cluster(volume_id=volume.volume_id)``.

    Inside a Kubernetes cluster using it, the platform provides a static PersistentVolume named after
    ``volume_name``; a claim bound to it (see the components' checkpoint store) sees the volume's files.
    Outputs: ``volume_id`` (also the resource id) and ``status``, plus every input.
    """

    volume_id: pulumi.Output[str]
    status: pulumi.Output[str]
    volume_name: pulumi.Output[str]
    size_tib: pulumi.Output[int]
    region: pulumi.Output[str]

    def __init__(
        self,
        resource_name: str,
        args: VolumeArgs | None = None,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        props: dict[str, Any] = _given(args)
        unknown = set(kwargs) - set(VOLUME_FIELDS)
        if unknown:
            raise TypeError(
                f"Volume got unknown arguments {sorted(unknown)}; the inputs are {', '.join(VOLUME_FIELDS)}"
            )
        props.update({k: v for k, v in kwargs.items() if v is not None})
        for name in (*VOLUME_FIELDS, *VOLUME_OUTPUT_NAMES):
            props.setdefault(name, None)
        # Its data is kept on destroy unless the code says otherwise (the preview shows the retain).
        keep = pulumi.ResourceOptions(retain_on_delete=props.get("allow_data_loss") is not True)
        super().__init__(VolumeProvider(), resource_name, props, pulumi.ResourceOptions.merge(keep, opts))
