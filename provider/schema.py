"""The Cluster resource's inputs: for each field, its default and what a change to it does.

Read like a Terraform schema: one row per input, with its plan modifier side by side.

- ``UPDATE``: the API changes it in place (PUT with only the changed fields).
- ``REPLACE``: the API cannot change it; a new cluster is made.
- ``LOCAL``: ours alone, never sent to the API; a change needs no API call.
- ``BRING_UP``: sent on create only, for the platform to act on while it brings the cluster up (acceptance
  tests); the API has no update for it and nothing left to act on later, so a change is recorded in the
  state without an API call, and never replaces a running cluster.

``server_default`` marks optional inputs the server fills in when left unset (a project, a driver
version): leaving them unset in code is never a difference from what the server reports.
``read_back`` marks inputs the API reports, so ``refresh`` sees a change made outside Pulumi; only
in-place (``UPDATE``) fields can change outside Pulumi, so only they are taken from a refresh (a
``REPLACE`` field the server spells differently, e.g. a normalised ``cuda_version``, is no change).
``replace_when`` marks an ``UPDATE`` field some of whose changes the API cannot make in place.
``catalog`` marks inputs checked against the region catalog at preview, and only when they change.
``constraint`` is the rule ``rules.validate`` holds the field to at preview, in words (the reference page
shows it beside the field).

This table and ``OUTPUT_NAMES`` are the one list of the resource's fields. ``ClusterArgs`` and the output
annotations of ``Cluster`` (``provider/resource.py``) spell them out again by hand, so that type checkers
and IDEs see them; ``tests/provider/test_schema.py`` fails when one changes without the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .nested_inputs import (
    AcceptanceTestsArgs,
    AddOnArgs,
    ClusterConfigArgs,
    OidcConfigArgs,
    SharedVolumeArgs,
)
from .vocabulary import BillingType, ClusterType, GpuType

# The resource's type token, as the engine records it in the state: module and name are kept forever.
RESOURCE_MODULE = "together_clusters"
RESOURCE_NAME = "Cluster"
CLUSTER_TYPE = f"pulumi-python:dynamic/{RESOURCE_MODULE}:{RESOURCE_NAME}"


class OnChange(Enum):
    UPDATE = "update"
    REPLACE = "replace"
    LOCAL = "local"
    BRING_UP = "bring-up"

    @property
    def sent_on_create(self) -> bool:
        """Whether the create request carries the field."""
        return self is not OnChange.LOCAL


@dataclass(frozen=True)
class FieldSpec:
    name: str
    on_change: OnChange
    default: Any = None
    required: bool = False
    server_default: bool = False
    read_back: bool = False
    replace_when: Callable[[Any, Any], bool] | None = None
    catalog: bool = False
    doc: str = ""
    constraint: str = ""
    wire_type: Any = str
    """The value's type: ``str``, ``int``, ``float``, ``bool``, an enumeration of ``vocabulary`` (a
    ``Literal``), a dataclass of ``nested_inputs``, or ``list[`` one of those ``]``. The package schema
    (``package_schema``) is written from it; ``ClusterArgs`` annotates the same type by hand."""


@dataclass(frozen=True)
class OutputSpec:
    """An output computed from the live resource: it never takes part in a diff."""

    name: str
    wire_type: Any
    doc: str
    always: bool = True
    """Always present once the resource exists (``False``: may be null, e.g. no preemption yet)."""
    secret: bool = False
    kept_on_update: bool = False
    """An update in place never changes it (the id, the endpoint, the kubeconfig): a preview of the update shows
    its old value, as the Terraform plugin framework's ``UseStateForUnknown`` does, where it would otherwise be
    unknown and make whatever is built from it (a Kubernetes provider from the kubeconfig) look replaced."""


def add_on_set_changes(old: Any, new: Any) -> bool:
    """The API updates an add-on's config by name, but cannot add or remove one in place."""

    def names(add_ons: Any) -> set[tuple[Any, Any]]:
        items = add_ons if isinstance(add_ons, list) else []
        return {(a.get("name"), a.get("add_on_type")) for a in items if isinstance(a, dict)}

    return names(old) != names(new)


def _allow_data_loss(doc: str) -> FieldSpec:
    """The opt-in, ours alone, to a plan that loses data; ``doc`` says which plans."""
    return FieldSpec("allow_data_loss", OnChange.LOCAL, default=False, doc=doc, wire_type=bool)


def _adopt(kind: str) -> FieldSpec:
    """``adopt_<kind>_id``: take in an existing ``kind`` instead of creating one (a new id replaces)."""
    return FieldSpec(
        f"adopt_{kind}_id",
        OnChange.REPLACE,
        doc=f"Adopt this existing {kind} instead of creating one (pulumi import does not work here).",
    )


_FIELDS = (
    FieldSpec("cluster_name", OnChange.REPLACE, required=True, read_back=True, doc="Name of the cluster."),
    FieldSpec(
        "region",
        OnChange.REPLACE,
        required=True,
        read_back=True,
        catalog=True,
        doc="Region, from list_regions().",
    ),
    FieldSpec(
        "gpu_type",
        OnChange.REPLACE,
        wire_type=GpuType,
        required=True,
        read_back=True,
        catalog=True,
        doc="GPU type, e.g. H100_SXM.",
    ),
    FieldSpec(
        "num_gpus",
        OnChange.UPDATE,
        wire_type=int,
        required=True,
        read_back=True,
        doc="Standard (on-demand) GPUs; with auto_scale, the floor the platform scales from.",
        constraint="a multiple of 8, at least 8 (one standard node); never converted to or from preemptible",
    ),
    FieldSpec(
        "num_preemptible_gpus",
        OnChange.UPDATE,
        wire_type=int,
        default=0,
        read_back=True,
        doc="Preemptible GPUs: a target the platform fills as capacity allows.",
        constraint="a multiple of 8; 0 on SLURM; never converted to or from standard",
    ),
    FieldSpec(
        "billing_type",
        OnChange.REPLACE,
        doc="How the cluster is billed: ON_DEMAND, RESERVED (for duration_days) or SCHEDULED_CAPACITY.",
        wire_type=BillingType,
        default="ON_DEMAND",
        read_back=True,
    ),
    FieldSpec(
        "cluster_type",
        OnChange.REPLACE,
        doc="KUBERNETES or SLURM (no preemptible capacity on SLURM).",
        wire_type=ClusterType,
        default="KUBERNETES",
        read_back=True,
    ),
    FieldSpec(
        "project_id",
        OnChange.REPLACE,
        doc="The project owning the cluster; the API key's default project when unset.",
        server_default=True,
        read_back=True,
    ),
    FieldSpec(
        "nvidia_version_id",
        OnChange.REPLACE,
        server_default=True,
        read_back=True,
        catalog=True,
        doc="Driver, from list_regions(); unset (and no cuda_version pair) means the region's newest, "
        "resolved at preview.",
    ),
    FieldSpec(
        "cuda_version",
        OnChange.REPLACE,
        doc="CUDA version, paired with nvidia_driver_version (the alternative to nvidia_version_id).",
        server_default=True,
        read_back=True,
    ),
    FieldSpec(
        "nvidia_driver_version",
        OnChange.REPLACE,
        doc="NVIDIA driver version, paired with cuda_version.",
        server_default=True,
        read_back=True,
    ),
    FieldSpec(
        "shared_volume",
        OnChange.REPLACE,
        wire_type=SharedVolumeArgs,
        doc="Inline shared volume: region, size_tib, volume_name.",
    ),
    FieldSpec("volume_id", OnChange.REPLACE, doc="An existing volume to attach."),
    FieldSpec(
        "cluster_config",
        OnChange.UPDATE,
        doc="The platform configuration (ClusterConfigArgs), changed in place.",
        wire_type=ClusterConfigArgs,
        read_back=True,
    ),
    FieldSpec(
        "add_ons",
        OnChange.UPDATE,
        wire_type=list[AddOnArgs],
        read_back=True,
        replace_when=add_on_set_changes,
        doc="Add-ons: a config change is made in place; adding or removing one replaces the cluster.",
    ),
    FieldSpec(
        "num_reserved_gpus",
        OnChange.UPDATE,
        doc="Reserved GPUs of a RESERVED cluster, changed in place.",
        wire_type=int,
        server_default=True,
        read_back=True,
        constraint="a multiple of 8, at most num_gpus; billing_type RESERVED only",
    ),
    FieldSpec(
        "duration_days",
        OnChange.REPLACE,
        doc="Reservation length of a RESERVED cluster, in days.",
        wire_type=int,
        constraint="1 or more",
    ),
    FieldSpec(
        "reservation_start_time", OnChange.REPLACE, doc="Start of the reservation (RFC 3339).", read_back=True
    ),
    FieldSpec(
        "reservation_end_time",
        OnChange.UPDATE,
        doc="End of the reservation (RFC 3339); extended in place.",
        read_back=True,
    ),
    FieldSpec(
        "slurm_shm_size_gib",
        OnChange.REPLACE,
        doc="Shared memory per Slurm node, in GiB.",
        wire_type=int,
        read_back=True,
        constraint="required (> 0) on SLURM",
    ),
    FieldSpec(
        "ready_timeout_minutes",
        OnChange.LOCAL,
        wire_type=float,
        default=60,
        doc="How long create waits for Ready.",
    ),
    _allow_data_loss(
        "Let a plan replace or delete the cluster with its inline shared_volume (not "
        "lifecycle-independent), which goes with it; refused at preview otherwise."
    ),
    _adopt("cluster"),
    # Added with the whole API (the official SDK 3.1.1's create sends 28 fields). After the fields above, so
    # a ClusterArgs written positionally before keeps its meaning.
    FieldSpec(
        "auto_scale",
        OnChange.REPLACE,
        wire_type=bool,
        doc="Let the platform grow the cluster's standard nodes under load, from num_gpus up to "
        "auto_scale_max_gpus, and shrink them back when idle. num_gpus is then the floor the code owns; "
        "the platform's own scaling is never drift. The API cannot turn it on or off in place.",
        constraint="needs auto_scale_max_gpus",
    ),
    FieldSpec(
        "auto_scale_max_gpus",
        OnChange.REPLACE,
        wire_type=int,
        doc="The ceiling autoscaling may grow the cluster to (standard GPUs; every GPU above num_gpus is paid "
        "on demand). The API cannot change it in place.",
        constraint="a multiple of 8, at least num_gpus; only with auto_scale",
    ),
    FieldSpec(
        "capacity_pool_id",
        OnChange.REPLACE,
        read_back=True,
        doc="A capacity pool (reserved capacity) to draw this cluster's GPUs from.",
    ),
    FieldSpec(
        "num_capacity_pool_gpus",
        OnChange.UPDATE,
        wire_type=int,
        server_default=True,
        read_back=True,
        doc="How many of num_gpus come from the capacity pool; left unset, the platform keeps its value.",
        constraint="a multiple of 8, at most num_gpus; only with capacity_pool_id",
    ),
    FieldSpec(
        "oidc_config",
        OnChange.REPLACE,
        wire_type=OidcConfigArgs,
        read_back=True,
        doc="Sign in to the cluster's Kubernetes API with an OIDC issuer (OidcConfigArgs).",
        constraint="client_id, issuer_url, username_claim, username_prefix, group_claim, group_prefix",
    ),
    FieldSpec(
        "acceptance_tests_params",
        OnChange.BRING_UP,
        wire_type=AcceptanceTestsArgs,
        doc="GPU acceptance tests to run while the cluster is brought up (AcceptanceTestsArgs); a later "
        "change is recorded without an API call (there is nothing left to test).",
    ),
    FieldSpec(
        "install_traefik",
        OnChange.REPLACE,
        wire_type=bool,
        read_back=True,
        doc="Install the Traefik ingress controller (off by default).",
        constraint="cluster_type KUBERNETES only",
    ),
    FieldSpec(
        "slurm_image",
        OnChange.REPLACE,
        doc="A custom Slurm image.",
        constraint="cluster_type SLURM only",
    ),
)

FIELDS: dict[str, FieldSpec] = {spec.name: spec for spec in _FIELDS}

_TARGET_OUTPUTS = (
    OutputSpec("api_endpoint", str, "The compute API the resource was made through.", kept_on_update=True),
    OutputSpec(
        "api_project_id",
        str,
        "The project the API key worked in when the resource was made.",
        always=False,
        kept_on_update=True,
    ),
    OutputSpec(
        "api_organization_id",
        str,
        "The organization of that project, as the API reports it.",
        always=False,
        kept_on_update=True,
    ),
)
TARGET_OUTPUTS: tuple[str, ...] = tuple(spec.name for spec in _TARGET_OUTPUTS)
"""Outputs of every resource: where it lives. Refresh, update and delete refuse another endpoint or project."""

# Outputs computed from the live cluster. They never take part in a diff.
_OUTPUTS = (
    OutputSpec("cluster_id", str, "The cluster's id (also the resource's id).", kept_on_update=True),
    OutputSpec("status", str, "The API's status, e.g. Ready or WaitingForDataPlaneNodes."),
    OutputSpec("phase", str, "The API's phase, e.g. CLUSTER_PHASE_READY."),
    OutputSpec("desired_preemptible_gpus", int, "The preemptible target the platform works toward."),
    OutputSpec(
        "allocated_preemptible_gpus", int, "Preemptible GPUs the platform has found so far (may stay below)."
    ),
    OutputSpec("preemptible_shortfall_gpus", int, "desired_preemptible_gpus minus allocated_preemptible_gpus."),
    OutputSpec("standard_nodes", int, "Standard (on-demand) nodes in the cluster."),
    OutputSpec("preemptible_nodes", int, "Preemptible nodes in the cluster."),
    OutputSpec("recent_preemptions", int, "Preemptions the platform reports for the cluster."),
    OutputSpec("last_preempted_at", str, "When a node of the cluster was last preempted.", always=False),
    OutputSpec("kube_config", str, "The cluster's kubeconfig (a secret).", secret=True, kept_on_update=True),
    OutputSpec("created_at", str, "When the cluster was created.", kept_on_update=True),
    *_TARGET_OUTPUTS,
)
OUTPUTS: dict[str, OutputSpec] = {spec.name: spec for spec in _OUTPUTS}
OUTPUT_NAMES: tuple[str, ...] = tuple(OUTPUTS)
SECRET_OUTPUTS: tuple[str, ...] = tuple(name for name, spec in OUTPUTS.items() if spec.secret)


def _with_defaults(fields: dict[str, FieldSpec], inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (inputs.get(name) if inputs.get(name) is not None else spec.default)
        for name, spec in fields.items()
    }


def with_defaults(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs with every known field present, defaults filled in; unknown keys dropped."""
    return _with_defaults(FIELDS, inputs)


# --- the Volume resource: its own table, read like the Cluster's ------------------------------------

VOLUME_RESOURCE_NAME = "Volume"
VOLUME_TYPE = f"pulumi-python:dynamic/{RESOURCE_MODULE}:{VOLUME_RESOURCE_NAME}"

_VOLUME_FIELDS = (
    FieldSpec("volume_name", OnChange.REPLACE, required=True, read_back=True, doc="Name of the volume."),
    FieldSpec("region", OnChange.REPLACE, required=True, doc="Region, from list_regions(): the cluster's."),
    FieldSpec(
        "size_tib",
        OnChange.UPDATE,
        wire_type=int,
        required=True,
        read_back=True,
        doc="Size in whole TiB: grown in place; a shrink is refused at preview (the API cannot shrink).",
    ),
    FieldSpec(
        "is_lifecycle_independent",
        OnChange.REPLACE,
        wire_type=bool,
        default=True,
        doc="Kept when the cluster using it is deleted (default): a replaced cluster gets it back.",
    ),
    FieldSpec("project_id", OnChange.REPLACE, server_default=True, doc="Project owning the volume."),
    FieldSpec(
        "instance_cluster_id", OnChange.REPLACE, doc="Place it on the same infrastructure as this cluster."
    ),
    _allow_data_loss(
        "Let a plan delete this volume with its data (a replacement, or a destroy); refused otherwise."
    ),
    _adopt("volume"),
)

VOLUME_FIELDS: dict[str, FieldSpec] = {spec.name: spec for spec in _VOLUME_FIELDS}
VOLUME_OUTPUTS: dict[str, OutputSpec] = {
    spec.name: spec
    for spec in (
        OutputSpec("volume_id", str, "The volume's id (also the resource's id).", kept_on_update=True),
        OutputSpec("status", str, "The API's status of the volume, e.g. available."),
        *_TARGET_OUTPUTS,
    )
}
VOLUME_OUTPUT_NAMES: tuple[str, ...] = tuple(VOLUME_OUTPUTS)


def volume_with_defaults(inputs: dict[str, Any]) -> dict[str, Any]:
    """A Volume's inputs with every known field present, defaults filled in; unknown keys dropped."""
    return _with_defaults(VOLUME_FIELDS, inputs)
