""""May these inputs exist?": the platform's rules for a Cluster's inputs, checked at preview. Pure: plain
dicts in, the broken rules out, each naming the field, the value and the fix. Values unknown at preview are
skipped; the engine calls ``check`` again once they are known."""

from __future__ import annotations

from typing import Any

from together_clusters.platform import GPUS_PER_NODE

from .plan_types import Failure, is_int, is_unknown, parse_time
from .schema import FIELDS
from .vocabulary import BILLING_TYPES, CLUSTER_TYPES, GPU_TYPES


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
    failures += _validate_autoscale(known, unknown)
    failures += _validate_capacity_pool(known, unknown)
    failures += _validate_one_cluster_type(known)
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
        if not is_int(num_gpus):
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
        if not is_int(value) or value < 0:
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
    if days is not None and (not is_int(days) or days < 1):
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
    if shm is not None and (not is_int(shm) or shm <= 0):
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


def _validate_autoscale(known: dict[str, Any], unknown: set[str]) -> list[Failure]:
    """Autoscaling grows the cluster from ``num_gpus`` to a ceiling the code must name (it is what the
    cluster may cost); the ceiling is whole nodes, and meaningless without autoscaling."""
    auto_scale, ceiling, num_gpus = (
        known.get("auto_scale"),
        known.get("auto_scale_max_gpus"),
        known.get("num_gpus"),
    )
    if auto_scale is not None and not isinstance(auto_scale, bool):
        return [Failure("auto_scale", f"auto_scale must be True or False; got {auto_scale!r}.")]
    if auto_scale is True and ceiling is None and "auto_scale_max_gpus" not in unknown:
        floor = num_gpus if isinstance(num_gpus, int) else GPUS_PER_NODE
        return [
            Failure(
                "auto_scale_max_gpus",
                "auto_scale is True but auto_scale_max_gpus is not set: autoscaling needs the ceiling it may "
                f"grow the cluster to (standard GPUs, paid on demand). Set auto_scale_max_gpus to "
                f"{floor + GPUS_PER_NODE} or more (a multiple of {GPUS_PER_NODE}), or remove auto_scale.",
            )
        ]
    if ceiling is None:
        return []
    if auto_scale is not True and "auto_scale" not in unknown:
        return [
            Failure(
                "auto_scale_max_gpus",
                f"auto_scale_max_gpus is {ceiling!r} but auto_scale is not True: the ceiling applies to an "
                "autoscaling cluster only. Set auto_scale=True, or remove auto_scale_max_gpus.",
            )
        ]
    if not is_int(ceiling) or ceiling < 0:
        return [
            Failure("auto_scale_max_gpus", f"auto_scale_max_gpus must be a whole number; got {ceiling!r}.")
        ]
    if ceiling % GPUS_PER_NODE:
        return [Failure("auto_scale_max_gpus", _not_whole_nodes("auto_scale_max_gpus", ceiling))]
    if is_int(num_gpus) and ceiling < num_gpus:
        return [
            Failure(
                "auto_scale_max_gpus",
                f"auto_scale_max_gpus is {ceiling} but num_gpus is {num_gpus}: the cluster scales between "
                f"num_gpus and auto_scale_max_gpus. Set auto_scale_max_gpus to {num_gpus} or more, or lower "
                "num_gpus.",
            )
        ]
    return []


def _validate_capacity_pool(known: dict[str, Any], unknown: set[str]) -> list[Failure]:
    """GPUs drawn from a capacity pool are whole nodes, a share of ``num_gpus``, and need the pool."""
    draw, num_gpus = known.get("num_capacity_pool_gpus"), known.get("num_gpus")
    if draw is None:
        return []
    if not is_int(draw) or draw < 0:
        return [
            Failure(
                "num_capacity_pool_gpus",
                f"num_capacity_pool_gpus must be a whole number, 0 or more; got {draw!r}.",
            )
        ]
    if draw % GPUS_PER_NODE:
        return [Failure("num_capacity_pool_gpus", _not_whole_nodes("num_capacity_pool_gpus", draw))]
    if draw and "capacity_pool_id" not in known and "capacity_pool_id" not in unknown:
        return [
            Failure(
                "num_capacity_pool_gpus",
                f"num_capacity_pool_gpus is {draw} but capacity_pool_id is not set: GPUs are drawn from a named "
                "pool. Set capacity_pool_id to your pool's id, or remove num_capacity_pool_gpus.",
            )
        ]
    if is_int(num_gpus) and draw > num_gpus:
        return [
            Failure(
                "num_capacity_pool_gpus",
                f"num_capacity_pool_gpus is {draw} but num_gpus is {num_gpus}: the pool's GPUs are a share of "
                f"num_gpus. Set num_capacity_pool_gpus to {num_gpus} or less, or raise num_gpus.",
            )
        ]
    return []


# Inputs the platform takes for one cluster type only (the SDK's docs), and that type.
_ONE_CLUSTER_TYPE = {"install_traefik": "KUBERNETES", "slurm_image": "SLURM"}


def _validate_one_cluster_type(known: dict[str, Any]) -> list[Failure]:
    cluster_type = known.get("cluster_type", FIELDS["cluster_type"].default)
    failures = []
    for name, only in _ONE_CLUSTER_TYPE.items():
        value = known.get(name)
        if value is None or value is False or cluster_type == only or is_unknown(cluster_type):
            continue
        failures.append(
            Failure(
                name,
                f"{name} is {value!r} but cluster_type is {cluster_type}: it applies to {only} clusters only. "
                f"Remove {name}, or set cluster_type={only!r}.",
            )
        )
    return failures


_NESTED_INPUTS = ("shared_volume", "cluster_config", "add_ons", "oidc_config", "acceptance_tests_params")


def _validate_nested(known: dict[str, Any]) -> list[Failure]:
    if not any(name in known for name in _NESTED_INPUTS):
        return []
    # pydantic and the models load only when a nested input is given: a plain cluster's preview needs neither.
    import pydantic

    from .models import AcceptanceTestsParams, AddOnSpec, ClusterConfigSpec, OidcConfigSpec, SharedVolumeSpec

    failures: list[Failure] = []
    checks: list[tuple[str, type[pydantic.BaseModel], bool]] = [
        ("shared_volume", SharedVolumeSpec, False),
        ("cluster_config", ClusterConfigSpec, False),
        ("add_ons", AddOnSpec, True),
        ("oidc_config", OidcConfigSpec, False),
        ("acceptance_tests_params", AcceptanceTestsParams, False),
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
