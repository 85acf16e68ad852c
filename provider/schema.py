"""The Cluster resource's inputs: for each field, its default and what a change to it does.

Read like a Terraform schema: one row per input, with its plan modifier side by side.

- ``UPDATE``: the API changes it in place (PUT with only the changed fields).
- ``REPLACE``: the API cannot change it; a new cluster is made.
- ``LOCAL``: ours alone, never sent to the API; a change needs no API call.

``server_default`` marks optional inputs the server fills in when left unset (a project, a driver
version): leaving them unset in code is never a difference from what the server reports.
``read_back`` marks inputs the API reports, so ``refresh`` sees a change made outside Pulumi; only
in-place (``UPDATE``) fields can change outside Pulumi, so only they are taken from a refresh (a
``REPLACE`` field the server spells differently, e.g. a normalised ``cuda_version``, is no change).
``replace_when`` marks an ``UPDATE`` field some of whose changes the API cannot make in place.
``catalog`` marks inputs checked against the region catalog at preview, and only when they change.

This table and ``OUTPUT_NAMES`` are the one list of the resource's fields. ``ClusterArgs`` and the output
annotations of ``Cluster`` (``provider/resource.py``) spell them out again by hand, so that type checkers
and IDEs see them; ``tests/provider/test_schema.py`` fails when one changes without the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

# The resource's type token, as the engine records it in the state: module and name are kept forever.
RESOURCE_MODULE = "together_clusters"
RESOURCE_NAME = "Cluster"
CLUSTER_TYPE = f"pulumi-python:dynamic/{RESOURCE_MODULE}:{RESOURCE_NAME}"


class OnChange(Enum):
    UPDATE = "update"
    REPLACE = "replace"
    LOCAL = "local"


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


def add_on_set_changes(old: Any, new: Any) -> bool:
    """The API updates an add-on's config by name, but cannot add or remove one in place."""

    def names(add_ons: Any) -> set[tuple[Any, Any]]:
        items = add_ons if isinstance(add_ons, list) else []
        return {(a.get("name"), a.get("add_on_type")) for a in items if isinstance(a, dict)}

    return names(old) != names(new)


def _allow_data_loss(doc: str) -> FieldSpec:
    """The opt-in, ours alone, to a plan that loses data; ``doc`` says which plans."""
    return FieldSpec("allow_data_loss", OnChange.LOCAL, default=False, doc=doc)


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
        required=True,
        read_back=True,
        catalog=True,
        doc="GPU type, e.g. H100_SXM.",
    ),
    FieldSpec("num_gpus", OnChange.UPDATE, required=True, read_back=True, doc="Standard (on-demand) GPUs."),
    FieldSpec("num_preemptible_gpus", OnChange.UPDATE, default=0, read_back=True, doc="Preemptible GPUs."),
    FieldSpec("billing_type", OnChange.REPLACE, default="ON_DEMAND", read_back=True),
    FieldSpec("cluster_type", OnChange.REPLACE, default="KUBERNETES", read_back=True),
    FieldSpec("project_id", OnChange.REPLACE, server_default=True, read_back=True),
    FieldSpec(
        "nvidia_version_id",
        OnChange.REPLACE,
        server_default=True,
        read_back=True,
        catalog=True,
        doc="Driver, from list_regions(); unset (and no cuda_version pair) means the region's newest, "
        "resolved at preview.",
    ),
    FieldSpec("cuda_version", OnChange.REPLACE, server_default=True, read_back=True),
    FieldSpec("nvidia_driver_version", OnChange.REPLACE, server_default=True, read_back=True),
    FieldSpec("shared_volume", OnChange.REPLACE, doc="Inline shared volume: region, size_tib, volume_name."),
    FieldSpec("volume_id", OnChange.REPLACE, doc="An existing volume to attach."),
    FieldSpec("cluster_config", OnChange.UPDATE, read_back=True),
    FieldSpec(
        "add_ons",
        OnChange.UPDATE,
        read_back=True,
        replace_when=add_on_set_changes,
        doc="Add-ons: a config change is made in place; adding or removing one replaces the cluster.",
    ),
    FieldSpec("num_reserved_gpus", OnChange.UPDATE, server_default=True, read_back=True),
    FieldSpec("duration_days", OnChange.REPLACE),
    FieldSpec("reservation_start_time", OnChange.REPLACE, read_back=True),
    FieldSpec("reservation_end_time", OnChange.UPDATE, read_back=True),
    FieldSpec("slurm_shm_size_gib", OnChange.REPLACE, read_back=True),
    FieldSpec("ready_timeout_minutes", OnChange.LOCAL, default=60, doc="How long create waits for Ready."),
    _allow_data_loss(
        "Let a plan replace or delete the cluster with its inline shared_volume (not "
        "lifecycle-independent), which goes with it; refused at preview otherwise."
    ),
    _adopt("cluster"),
)

FIELDS: dict[str, FieldSpec] = {spec.name: spec for spec in _FIELDS}

TARGET_OUTPUTS: tuple[str, ...] = ("api_endpoint", "api_project_id", "api_organization_id")
"""Outputs of every resource: where it lives. Refresh, update and delete refuse another endpoint or project."""

# Outputs computed from the live cluster. They never take part in a diff.
OUTPUT_NAMES: tuple[str, ...] = (
    "cluster_id",
    "status",
    "phase",
    "desired_preemptible_gpus",
    "allocated_preemptible_gpus",
    "preemptible_shortfall_gpus",
    "standard_nodes",
    "preemptible_nodes",
    "recent_preemptions",
    "last_preempted_at",
    "kube_config",
    "created_at",
    *TARGET_OUTPUTS,
)
SECRET_OUTPUTS: tuple[str, ...] = ("kube_config",)


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
        required=True,
        read_back=True,
        doc="Size in whole TiB: grown in place; a shrink is refused at preview (the API cannot shrink).",
    ),
    FieldSpec(
        "is_lifecycle_independent",
        OnChange.REPLACE,
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
VOLUME_OUTPUT_NAMES: tuple[str, ...] = (
    "volume_id",
    "status",
    *TARGET_OUTPUTS,
)


def volume_with_defaults(inputs: dict[str, Any]) -> dict[str, Any]:
    """A Volume's inputs with every known field present, defaults filled in; unknown keys dropped."""
    return _with_defaults(VOLUME_FIELDS, inputs)
