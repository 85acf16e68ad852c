"""The ``Cluster`` Pulumi resource and its dynamic provider: glue between the engine, the rules and
the client.

Stability promise: the engine pickles ``ClusterProvider`` into the state by reference, as
``together_clusters.provider.resource.ClusterProvider``, and records the type
``pulumi-python:dynamic/together_clusters:Cluster``. Both names changed once, before the first release,
when the distribution moved into one import namespace; from then on they stay as they are in every
release, so state written today still refreshes and destroys later. The provider object carries no
attributes: the API key is read per call.

This module is what a Pulumi program imports: pulumi and the schema only. What the provider's calls do
lives in ``planning`` (configure, check, diff) and ``operations`` (create, read, update, delete), loaded
by the provider host on the first call that needs them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
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

from .schema import FIELDS, OUTPUT_NAMES, RESOURCE_MODULE, RESOURCE_NAME, SECRET_OUTPUTS


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
    """

    cluster_name: pulumi.Input[str]
    region: pulumi.Input[str]
    gpu_type: pulumi.Input[str]
    num_gpus: pulumi.Input[int]
    num_preemptible_gpus: pulumi.Input[int] | None = None
    billing_type: pulumi.Input[str] | None = None
    cluster_type: pulumi.Input[str] | None = None
    project_id: pulumi.Input[str] | None = None
    nvidia_version_id: pulumi.Input[str] | None = None
    cuda_version: pulumi.Input[str] | None = None
    nvidia_driver_version: pulumi.Input[str] | None = None
    shared_volume: pulumi.Input[dict[str, Any]] | None = None
    volume_id: pulumi.Input[str] | None = None
    cluster_config: pulumi.Input[dict[str, Any]] | None = None
    add_ons: pulumi.Input[list[dict[str, Any]]] | None = None
    num_reserved_gpus: pulumi.Input[int] | None = None
    duration_days: pulumi.Input[int] | None = None
    reservation_start_time: pulumi.Input[str] | None = None
    reservation_end_time: pulumi.Input[str] | None = None
    slurm_shm_size_gib: pulumi.Input[int] | None = None
    ready_timeout_minutes: pulumi.Input[float] | None = None
    adopt_cluster_id: pulumi.Input[str] | None = None


class Cluster(Resource, module=RESOURCE_MODULE, name=RESOURCE_NAME):
    """A Together GPU cluster with standard and preemptible capacity.

    Outputs: ``cluster_id`` (also the resource id), ``status``, ``phase``,
    ``desired_preemptible_gpus``, ``allocated_preemptible_gpus``, ``preemptible_shortfall_gpus``,
    ``standard_nodes``, ``preemptible_nodes``, ``recent_preemptions``, ``last_preempted_at``,
    ``kube_config`` (secret) and ``created_at``, plus every input.
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
    num_gpus: pulumi.Output[int]
    num_preemptible_gpus: pulumi.Output[int]

    def __init__(
        self,
        resource_name: str,
        args: ClusterArgs | None = None,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        props: dict[str, Any] = {k: v for k, v in asdict(args).items() if v is not None} if args else {}
        unknown = set(kwargs) - set(FIELDS)
        if unknown:
            raise TypeError(
                f"Cluster got unknown arguments {sorted(unknown)}; the inputs are {', '.join(FIELDS)}"
            )
        props.update({k: v for k, v in kwargs.items() if v is not None})
        for name in FIELDS:
            props.setdefault(name, None)
        for name in OUTPUT_NAMES:
            props.setdefault(name, None)
        secret_opts = pulumi.ResourceOptions(additional_secret_outputs=list(SECRET_OUTPUTS))
        super().__init__(
            ClusterProvider(), resource_name, props, pulumi.ResourceOptions.merge(secret_opts, opts)
        )
