"""The platform's rules for Cluster inputs, and how a change is carried out. Pure: plain dicts in,
plain answers out, no I/O.

``validate`` answers "may these inputs exist?"; ``plan_change`` answers "what does going from the
old inputs to the new ones do: nothing, an in-place update, a replacement, or something the
platform refuses?". The dynamic provider's ``check`` and ``diff`` call these at preview time, so
a bad plan fails before anything is spent. Every message names the field, the value and the fix.

Values unknown at preview (outputs of resources not yet created) are skipped by ``validate`` and
treated as "will change" by ``plan_change``; the engine calls ``check`` again once they are known.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pulumi.runtime.rpc import UNKNOWN

from together_clusters.platform import GPUS_PER_NODE

from .schema import FIELDS, FieldSpec, OnChange
from .vocabulary import BILLING_TYPES, CLUSTER_TYPES, GPU_TYPES

if TYPE_CHECKING:
    from .models import Region, RegionDriverVersion


@dataclass(frozen=True)
class Failure:
    """One broken rule: the input it concerns and a message that says how to fix it."""

    field: str
    message: str


@dataclass(frozen=True)
class ChangePlan:
    """What a change from old to new inputs does.

    ``replace`` and ``update`` list the fields that force a replacement or are changed in place;
    ``refusals`` are changes the platform cannot make at all.
    """

    replace: list[str] = field(default_factory=list)
    update: list[str] = field(default_factory=list)
    local: list[str] = field(default_factory=list)
    refusals: list[Failure] = field(default_factory=list)
    delete_before_replace: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.replace or self.update or self.local)


def is_unknown(value: Any) -> bool:
    """Whether a value, or anything inside it, is not known yet (preview of a dependent resource)."""
    if isinstance(value, str):
        return value == UNKNOWN
    if isinstance(value, dict):
        return any(is_unknown(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(is_unknown(v) for v in value)
    return False


# --- validation ----------------------------------------------------------------------------------


def validate(inputs: dict[str, Any]) -> list[Failure]:
    """Every rule the inputs break, in field order. Unknown values are not checked."""
    known = {k: v for k, v in inputs.items() if v is not None and not is_unknown(v)}
    unknown = {k for k, v in inputs.items() if is_unknown(v)}
    failures: list[Failure] = []

    for name, spec in FIELDS.items():
        if spec.required and name not in known and name not in unknown:
            failures.append(
                Failure(name, f"{name} is required; {spec.doc or 'set it on the Cluster.'}".strip())
            )

    if "cluster_name" in known and (
        not isinstance(known["cluster_name"], str) or not known["cluster_name"].strip()
    ):
        failures.append(
            Failure(
                "cluster_name", f"cluster_name must be a non-empty string; got {known['cluster_name']!r}."
            )
        )
    for name, allowed in (
        ("gpu_type", GPU_TYPES),
        ("billing_type", BILLING_TYPES),
        ("cluster_type", CLUSTER_TYPES),
    ):
        if name in known and known[name] not in allowed:
            failures.append(
                Failure(
                    name,
                    f"{name} {known[name]!r} is not one the API accepts; use one of {', '.join(allowed)}.",
                )
            )

    failures += _validate_gpu_counts(known)
    failures += _validate_reservation(known)
    failures += _validate_billing(known, unknown)
    failures += _validate_driver_and_volume(known)
    failures += _validate_nested(known)

    timeout = known.get("ready_timeout_minutes")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        failures.append(
            Failure(
                "ready_timeout_minutes",
                f"ready_timeout_minutes must be a positive number of minutes; got {timeout!r}.",
            )
        )
    return failures


def _validate_gpu_counts(known: dict[str, Any]) -> list[Failure]:
    failures: list[Failure] = []
    num_gpus = known.get("num_gpus")
    if num_gpus is not None:
        if not _is_int(num_gpus):
            failures.append(Failure("num_gpus", f"num_gpus must be a whole number; got {num_gpus!r}."))
        elif num_gpus < GPUS_PER_NODE:
            preemptible = known.get("num_preemptible_gpus") or 0
            also = f" (even with num_preemptible_gpus={preemptible})" if preemptible else ""
            failures.append(
                Failure(
                    "num_gpus",
                    f"num_gpus is {num_gpus}: a cluster needs at least one standard node{also}. "
                    f"Set num_gpus to {GPUS_PER_NODE} or more (a multiple of {GPUS_PER_NODE}); "
                    "preemptible GPUs cannot be the whole cluster.",
                )
            )
        elif num_gpus % GPUS_PER_NODE:
            failures.append(Failure("num_gpus", _not_whole_nodes("num_gpus", num_gpus)))

    for name in ("num_preemptible_gpus", "num_reserved_gpus"):
        value = known.get(name)
        if value is None:
            continue
        if not _is_int(value) or value < 0:
            failures.append(Failure(name, f"{name} must be a whole number, 0 or more; got {value!r}."))
        elif value % GPUS_PER_NODE:
            failures.append(Failure(name, _not_whole_nodes(name, value)))
    return failures


def _validate_reservation(known: dict[str, Any]) -> list[Failure]:
    """Reserved GPUs belong to RESERVED clusters and are a share of ``num_gpus``; durations are whole days."""
    failures: list[Failure] = []
    billing = known.get("billing_type", FIELDS["billing_type"].default)
    reserved, num_gpus = known.get("num_reserved_gpus"), known.get("num_gpus")
    if reserved is not None and billing != "RESERVED":
        failures.append(
            Failure(
                "num_reserved_gpus",
                f"num_reserved_gpus is {reserved!r} but billing_type is {billing}: reserved GPUs apply to "
                "billing_type RESERVED only. Remove num_reserved_gpus, or set billing_type='RESERVED'.",
            )
        )
    elif isinstance(reserved, int) and isinstance(num_gpus, int) and reserved > num_gpus:
        failures.append(
            Failure(
                "num_reserved_gpus",
                f"num_reserved_gpus is {reserved} but num_gpus is {num_gpus}: the reserved GPUs are a share of "
                f"num_gpus. Set num_reserved_gpus to {num_gpus} or less.",
            )
        )
    days = known.get("duration_days")
    if days is not None and (not _is_int(days) or days < 1):
        failures.append(
            Failure(
                "duration_days",
                f"duration_days must be a whole number of days, 1 or more; got {days!r}. Set it to 1 or more, "
                "or leave it unset.",
            )
        )
    return failures


def _not_whole_nodes(name: str, value: int) -> str:
    lower = value - value % GPUS_PER_NODE
    upper = lower + GPUS_PER_NODE
    choices = f"{lower} or {upper}" if lower else f"{upper}"
    return f"{name} is {value}: GPUs come in whole nodes of {GPUS_PER_NODE}, so it must be a multiple of 8 (use {choices})."


def _validate_billing(known: dict[str, Any], unknown: set[str]) -> list[Failure]:
    failures: list[Failure] = []
    billing = known.get("billing_type", FIELDS["billing_type"].default)
    times = {}
    for name in ("reservation_start_time", "reservation_end_time"):
        if name in known:
            parsed = parse_time(known[name])
            if parsed is None:
                failures.append(
                    Failure(
                        name,
                        f"{name} must be an ISO-8601 time such as 2027-01-01T00:00:00Z; got {known[name]!r}.",
                    )
                )
            else:
                times[name] = parsed
    if billing == "SCHEDULED_CAPACITY":
        for name in ("reservation_start_time", "reservation_end_time"):
            if name not in known and name not in unknown:
                failures.append(
                    Failure(
                        name, f"billing_type SCHEDULED_CAPACITY needs {name}: set both reservation times."
                    )
                )
    if len(times) == 2 and times["reservation_end_time"] <= times["reservation_start_time"]:
        failures.append(
            Failure(
                "reservation_end_time",
                f"reservation_end_time {known['reservation_end_time']} must be after "
                f"reservation_start_time {known['reservation_start_time']}.",
            )
        )
    if (
        known.get("cluster_type") == "SLURM"
        and "slurm_shm_size_gib" not in known
        and "slurm_shm_size_gib" not in unknown
    ):
        failures.append(
            Failure(
                "slurm_shm_size_gib",
                "cluster_type SLURM needs slurm_shm_size_gib (shared memory in GiB); set it.",
            )
        )
    preemptible = known.get("num_preemptible_gpus")
    if known.get("cluster_type") == "SLURM" and preemptible:
        # The platform's preemptible-compute docs: Slurm clusters do not support preemptible nodes (yet).
        failures.append(
            Failure(
                "num_preemptible_gpus",
                f"num_preemptible_gpus is {preemptible} but cluster_type is SLURM: Slurm clusters do not "
                "support preemptible nodes. Set num_preemptible_gpus to 0 (or remove it), or use "
                "cluster_type='KUBERNETES'.",
            )
        )
    shm = known.get("slurm_shm_size_gib")
    if shm is not None and (not _is_int(shm) or shm <= 0):
        failures.append(
            Failure("slurm_shm_size_gib", f"slurm_shm_size_gib must be a positive whole number; got {shm!r}.")
        )
    return failures


def _validate_driver_and_volume(known: dict[str, Any]) -> list[Failure]:
    failures: list[Failure] = []
    has_cuda, has_driver = "cuda_version" in known, "nvidia_driver_version" in known
    if has_cuda != has_driver:
        given, missing = (
            ("cuda_version", "nvidia_driver_version")
            if has_cuda
            else ("nvidia_driver_version", "cuda_version")
        )
        failures.append(
            Failure(
                missing,
                f"{given} is set without {missing}: the legacy driver selector needs both, "
                "or use nvidia_version_id alone (see list_regions()).",
            )
        )
    volume = known.get("shared_volume")
    region = known.get("region")
    if (
        isinstance(volume, dict)
        and isinstance(volume.get("region"), str)
        and isinstance(region, str)
        and volume["region"] != region
    ):
        failures.append(
            Failure(
                "shared_volume",
                f"shared_volume.region is {volume['region']!r} but the cluster's region is {region!r}: a shared "
                f"volume is mounted in its own region only. Set shared_volume.region to {region!r}.",
            )
        )
    if "shared_volume" in known and "volume_id" in known:
        failures.append(
            Failure(
                "volume_id",
                "shared_volume and volume_id are both set: create a new volume with shared_volume "
                "or attach an existing one with volume_id, not both.",
            )
        )
    return failures


_NESTED_INPUTS = ("shared_volume", "cluster_config", "add_ons")


def _validate_nested(known: dict[str, Any]) -> list[Failure]:
    if not any(name in known for name in _NESTED_INPUTS):
        return []
    # pydantic and the models load only when a nested input is given: a plain cluster's preview needs neither.
    import pydantic

    from .models import AddOnSpec, ClusterConfigSpec, SharedVolumeSpec

    failures: list[Failure] = []
    checks: list[tuple[str, type[pydantic.BaseModel], bool]] = [
        ("shared_volume", SharedVolumeSpec, False),
        ("cluster_config", ClusterConfigSpec, False),
        ("add_ons", AddOnSpec, True),
    ]
    for name, model, is_list in checks:
        if name not in known:
            continue
        items = known[name] if is_list else [known[name]]
        if is_list and not isinstance(items, list):
            failures.append(Failure(name, f"{name} must be a list; got {items!r}."))
            continue
        problems = []
        for index, item in enumerate(items):
            where = f"{name}[{index}]" if is_list else name
            try:
                model.model_validate(item)
            except pydantic.ValidationError as exc:
                for error in exc.errors():
                    path = ".".join(str(p) for p in error["loc"])
                    problems.append(f"{where}.{path}: {error['msg']} (got {error.get('input')!r})")
        if problems:
            failures.append(Failure(name, "; ".join(problems) + "."))
    return failures


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 time as an aware datetime (UTC when no zone is given); ``None`` if unparsable."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# --- change planning -----------------------------------------------------------------------------


def normalize(name: str, value: Any) -> Any:
    """A value in the form it is compared in: times as instants, None-valued keys dropped."""
    if value is None:
        return None
    if name in ("reservation_start_time", "reservation_end_time"):
        return parse_time(value) or value
    return _drop_none(value)


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_drop_none(v) for v in value]
    return value


def _differs(name: str, old: Any, new: Any) -> bool:
    if is_unknown(new):
        return True
    spec = FIELDS[name]
    if new is None:
        new = spec.default
        if new is None:
            # Left unset: the server's value (or none) stands. Not a change.
            return False
    if old is None:
        old = spec.default
    return normalize(name, old) != normalize(name, new)


def changes_by_effect(
    fields: Mapping[str, FieldSpec],
    olds: dict[str, Any],
    news: dict[str, Any],
    differs: Callable[[str, Any, Any], bool],
    adopt_field: str,
    adoption_changes: bool,
) -> tuple[list[str], list[str], list[str]]:
    """The fields of a resource's table whose value ``differs`` from ``olds`` to ``news``, sorted by what
    their change does: (replace, update, local), in table order. A ``replace_when`` field's change may be a
    replacement; the adoption field (``adopt_field``) is one when ``adoption_changes``."""
    by_effect: dict[OnChange, list[str]] = {effect: [] for effect in OnChange}
    for name, spec in fields.items():
        if name == adopt_field:
            if adoption_changes:
                by_effect[OnChange.REPLACE].append(name)
            continue
        if not differs(name, olds.get(name), news.get(name)):
            continue
        on_change = spec.on_change
        if spec.replace_when is not None and not is_unknown(news.get(name)):
            if spec.replace_when(olds.get(name), news.get(name)):
                on_change = OnChange.REPLACE
        by_effect[on_change].append(name)
    return by_effect[OnChange.REPLACE], by_effect[OnChange.UPDATE], by_effect[OnChange.LOCAL]


def plan_change(olds: dict[str, Any], news: dict[str, Any]) -> ChangePlan:
    """What going from ``olds`` (current state) to ``news`` (the code) does to the cluster."""
    replace, update, local = changes_by_effect(
        FIELDS,
        olds,
        news,
        _differs,
        "adopt_cluster_id",
        _adoption_changes(olds, news.get("adopt_cluster_id")),
    )
    refusals = [] if replace else conversion_refusals(olds, news)
    if replace and (loss := inline_volume_loss(olds, news, replace)) is not None:
        refusals.append(loss)
    same_name = not _differs("cluster_name", olds.get("cluster_name"), news.get("cluster_name"))
    # A volume is attached to one live cluster at a time: the new cluster can have it only once the old
    # one is gone, so a cluster with a volume_id is deleted before its replacement is made.
    with_volume = news.get("volume_id") is not None
    return ChangePlan(
        replace=replace,
        update=update,
        local=local,
        refusals=refusals,
        delete_before_replace=bool(replace) and (same_name or with_volume),
    )


def inline_volume_at_risk(inputs: dict[str, Any]) -> str | None:
    """The name of the cluster's inline ``shared_volume`` if it is deleted with the cluster, else None."""
    volume = inputs.get("shared_volume")
    if not isinstance(volume, dict) or volume.get("is_lifecycle_independent") is True:
        return None
    return str(volume.get("volume_name"))


def inline_volume_loss(olds: dict[str, Any], news: dict[str, Any], replace: list[str]) -> Failure | None:
    """The refusal of a replacement that would delete the old cluster's inline volume with its data."""
    volume_name = inline_volume_at_risk(olds)
    if volume_name is None or news.get("allow_data_loss") is True:
        return None
    cluster = repr(olds.get("cluster_name"))
    if olds.get("cluster_id"):
        cluster += f" ({olds['cluster_id']})"
    return Failure(
        replace[0],
        f"changing {', '.join(replace)} would replace cluster {cluster} and delete its inline shared_volume "
        f"{volume_name!r} with it (not lifecycle-independent), and every checkpoint on it. Ways out: keep "
        f"{', '.join(replace)} as it is; put the data on a Volume resource (together_clusters.provider.Volume, "
        "lifecycle-independent by default) attached with volume_id; for a new cluster, set "
        "shared_volume.is_lifecycle_independent=True; or set allow_data_loss=True on the Cluster to delete "
        "the volume.",
    )


def _adoption_changes(olds: dict[str, Any], new_adopt_id: Any) -> bool:
    """Adopting is a one-off: only naming a different existing cluster later forces a replacement."""
    if new_adopt_id is None:
        return False
    if is_unknown(new_adopt_id):
        return True
    return new_adopt_id not in (olds.get("adopt_cluster_id"), olds.get("cluster_id"))


def conversion_refusals(olds: dict[str, Any], news: dict[str, Any]) -> list[Failure]:
    """Refuse one update that shrinks one compute class while growing the other.

    The platform cannot turn a standard node into a preemptible one (or back) in place, and doing
    both moves in one step would ask it to.
    """
    counts = {}
    for name in ("num_gpus", "num_preemptible_gpus"):
        old, new = olds.get(name, FIELDS[name].default), news.get(name, FIELDS[name].default)
        if (
            old is None
            or new is None
            or is_unknown(old)
            or is_unknown(new)
            or not (_is_int(old) and _is_int(new))
        ):
            return []
        counts[name] = (old, new)
    (std_old, std_new), (pre_old, pre_new) = counts["num_gpus"], counts["num_preemptible_gpus"]
    if (std_new - std_old) * (pre_new - pre_old) >= 0:
        return []
    if std_new < std_old:
        direction = "standard nodes into preemptible ones"
        first = f"raise num_preemptible_gpus to {pre_new} with num_gpus kept at {std_old}, deploy, then lower num_gpus to {std_new}"
    else:
        direction = "preemptible nodes into standard ones"
        first = f"raise num_gpus to {std_new} with num_preemptible_gpus kept at {pre_old}, deploy, then lower num_preemptible_gpus to {pre_new}"
    return [
        Failure(
            "num_gpus",
            f"num_gpus {std_old} -> {std_new} together with num_preemptible_gpus {pre_old} -> {pre_new} would "
            f"convert {direction} in place, which the platform cannot do. Change one class per update: "
            f"{first}. Or replace the cluster (`pulumi up --replace <urn>`).",
        )
    ]


# --- the region catalog -------------------------------------------------------------------------


def catalog_fields_to_check(olds: dict[str, Any], news: dict[str, Any]) -> set[str]:
    """The catalog-checked inputs that this change sets anew (all of them for a new cluster).

    An unchanged cluster is never refused because its region stopped offering its GPU or driver.
    """
    names = {n for n, spec in FIELDS.items() if spec.catalog}
    if not olds:
        return names
    return {n for n in names if _differs(n, olds.get(n), news.get(n))}


def validate_against_catalog(
    inputs: dict[str, Any], regions: list[Region], fields: set[str] | None = None
) -> list[Failure]:
    """Region, GPU type and driver choices against what ``list_regions()`` offers.

    Only known values of ``fields`` (default: all catalog fields) are checked, against the region
    the inputs name. An empty catalog (the API could not be asked) checks nothing.
    """
    fields = fields if fields is not None else {n for n, spec in FIELDS.items() if spec.catalog}
    region_name, gpu_type = inputs.get("region"), inputs.get("gpu_type")
    if not regions or not fields or not isinstance(region_name, str) or is_unknown(region_name):
        return []
    by_name = {r.name: r for r in regions if r.name}
    region = by_name.get(region_name)
    if region is None:
        if "region" not in fields:
            return []
        return [
            Failure(
                "region", f"region {region_name!r} is not offered; use one of {', '.join(sorted(by_name))}."
            )
        ]
    failures = []
    offered = region.supported_instance_types
    if (
        "gpu_type" in fields
        and isinstance(gpu_type, str)
        and not is_unknown(gpu_type)
        and gpu_type not in offered
    ):
        failures.append(
            Failure(
                "gpu_type",
                f"gpu_type {gpu_type!r} is not offered in region {region_name}; it offers "
                f"{', '.join(offered)}. Pick one of those or another region.",
            )
        )
    version_id = inputs.get("nvidia_version_id")
    ids = [v.id for v in region.driver_versions if v.id]
    if (
        "nvidia_version_id" in fields
        and isinstance(version_id, str)
        and not is_unknown(version_id)
        and version_id not in ids
    ):
        failures.append(
            Failure(
                "nvidia_version_id",
                f"nvidia_version_id {version_id!r} is not offered in region {region_name}; use one of {', '.join(ids)}.",
            )
        )
    return failures


def has_driver_selector(inputs: dict[str, Any]) -> bool:
    """Whether the inputs choose a driver: ``nvidia_version_id``, or ``cuda_version`` with ``nvidia_driver_version``."""
    return inputs.get("nvidia_version_id") is not None or (
        inputs.get("cuda_version") is not None and inputs.get("nvidia_driver_version") is not None
    )


def default_driver(regions: list[Region], region_name: Any) -> RegionDriverVersion | None:
    """The driver a new cluster gets when the code names none: the newest the region offers."""
    region = next((r for r in regions if r.name == region_name), None)
    offered = [v for v in (region.driver_versions if region else []) if v.id and v.nvidia_driver_version]
    return max(offered, key=lambda v: _version_key(v.nvidia_driver_version), default=None)


def _version_key(version: Any) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in str(version).split("."))


def missing_driver_failure(region_name: Any, unread_because: str | None = None) -> Failure:
    """No driver chosen and none could be picked: says why the catalog was not read, when it knows."""
    if unread_because:
        return Failure(
            "nvidia_version_id",
            f"{unread_because}. The API is needed to pick region {region_name!r}'s default driver; or "
            "set nvidia_version_id (see `tg clusters list-regions`), or cuda_version with nvidia_driver_version.",
        )
    return Failure(
        "nvidia_version_id",
        f"no driver chosen and the catalog of region {region_name!r} could not be read to pick its default: "
        "set nvidia_version_id (see `tg clusters list-regions`), or cuda_version with nvidia_driver_version.",
    )
