"""Server-side checks of create and update requests, as the real service makes them.

Shape and types are already checked by the request models; these are the platform's rules.
"""

from __future__ import annotations

from datetime import datetime

from . import catalog
from .catalog import GPUS_PER_NODE
from .errors import invalid
from .records import ClusterRecord
from .shapes import ClusterCreateRequest, ClusterUpdateRequest, RegionDriverVersion


def check_gpu_count(field: str, value: int, minimum: int) -> None:
    """``value`` must be a multiple of 8 and at least ``minimum``."""
    if value % GPUS_PER_NODE == 0 and value >= minimum:
        return
    if minimum >= GPUS_PER_NODE:
        rule = f"a multiple of {GPUS_PER_NODE} and at least {minimum} (one standard node)"
    else:
        rule = f"a non-negative multiple of {GPUS_PER_NODE}"
    raise invalid(f"{field} must be {rule}; got {value}", field)


def check_create(req: ClusterCreateRequest, default_driver: bool = False) -> RegionDriverVersion:
    """Refuse a create request the platform would refuse; returns the driver entry it selects.

    ``default_driver`` accepts a request without a driver selector (see :func:`catalog.resolve_driver`).
    """
    if not req.cluster_name.strip():
        raise invalid(f"cluster_name must not be empty; got {req.cluster_name!r}", "cluster_name")
    check_gpu_count("num_gpus", req.num_gpus, GPUS_PER_NODE)
    if req.num_preemptible_gpus is not None:
        check_gpu_count("num_preemptible_gpus", req.num_preemptible_gpus, 0)
    catalog.check_offered(req.region, req.gpu_type)
    driver = catalog.resolve_driver(
        req.region, req.nvidia_version_id, req.cuda_version, req.nvidia_driver_version, default_driver
    )
    if req.billing_type == "SCHEDULED_CAPACITY":
        for field in ("reservation_start_time", "reservation_end_time"):
            if getattr(req, field) is None:
                raise invalid(f"{field} is required when billing_type is SCHEDULED_CAPACITY; got null", field)
    if req.reservation_start_time and req.reservation_end_time:
        if req.reservation_end_time <= req.reservation_start_time:
            raise invalid(
                f"reservation_end_time must be after reservation_start_time; got {req.reservation_end_time.isoformat()}",
                "reservation_end_time",
            )
    if req.cluster_type == "SLURM" and not req.slurm_shm_size_gib:
        raise invalid(
            f"slurm_shm_size_gib is required (> 0) when cluster_type is SLURM; got {req.slurm_shm_size_gib}",
            "slurm_shm_size_gib",
        )
    _check_split(req.billing_type, req.num_gpus, req.num_reserved_gpus, req.num_capacity_pool_gpus)
    if req.num_capacity_pool_gpus and not req.capacity_pool_id:
        raise invalid(
            f"num_capacity_pool_gpus needs capacity_pool_id; got num_capacity_pool_gpus={req.num_capacity_pool_gpus}",
            "num_capacity_pool_gpus",
        )
    if req.auto_scale and req.auto_scale_max_gpus is not None and req.auto_scale_max_gpus < req.num_gpus:
        raise invalid(
            f"auto_scale_max_gpus must be at least num_gpus ({req.num_gpus}); got {req.auto_scale_max_gpus}",
            "auto_scale_max_gpus",
        )
    if req.shared_volume is not None and req.volume_id is not None:
        raise invalid(
            f"give shared_volume or volume_id, not both; got volume_id={req.volume_id!r}", "volume_id"
        )
    if req.shared_volume is not None:
        if req.shared_volume.region != req.region:
            raise invalid(
                f"shared_volume.region must be the cluster's region {req.region!r}; got {req.shared_volume.region!r}",
                "shared_volume.region",
            )
        if req.shared_volume.size_tib < 1:
            raise invalid(
                f"shared_volume.size_tib must be at least 1; got {req.shared_volume.size_tib}",
                "shared_volume.size_tib",
            )
    if req.duration_days is not None and req.duration_days < 1:
        raise invalid(f"duration_days must be at least 1; got {req.duration_days}", "duration_days")
    for i, add_on in enumerate(req.add_ons or []):
        if not add_on.name.strip():
            raise invalid(f"add_ons[{i}].name must not be empty; got {add_on.name!r}", f"add_ons.{i}.name")
    return driver


def check_update(req: ClusterUpdateRequest, record: ClusterRecord) -> None:
    """Refuse an update the platform would refuse, given the cluster's current settings."""
    num_gpus = record.num_gpus if req.num_gpus is None else req.num_gpus
    if req.num_gpus is not None:
        check_gpu_count("num_gpus", req.num_gpus, GPUS_PER_NODE)
    if req.num_preemptible_gpus is not None:
        check_gpu_count("num_preemptible_gpus", req.num_preemptible_gpus, 0)
    if req.num_reserved_gpus is not None and record.billing_type != "RESERVED":
        raise invalid(
            f"num_reserved_gpus applies to RESERVED clusters only; this cluster is {record.billing_type}",
            "num_reserved_gpus",
        )
    _check_split(record.billing_type, num_gpus, req.num_reserved_gpus, req.num_capacity_pool_gpus)
    if req.num_capacity_pool_gpus and "capacity_pool_id" not in record.echoed:
        raise invalid(
            "num_capacity_pool_gpus is only valid for clusters created with a capacity_pool_id; "
            f"got {req.num_capacity_pool_gpus}",
            "num_capacity_pool_gpus",
        )
    if req.cluster_type == "SLURM" and not record.echoed.get("slurm_shm_size_gib"):
        raise invalid("cluster_type SLURM needs slurm_shm_size_gib, which this cluster lacks", "cluster_type")
    if req.reservation_end_time is not None:
        _check_new_reservation_end(req.reservation_end_time, record)
    add_on_names = {a["name"] for a in record.add_ons}
    for i, add_on in enumerate(req.add_ons or []):
        if add_on.name not in add_on_names:
            raise invalid(
                f"add_ons[{i}].name must name an existing add-on; got {add_on.name!r}", f"add_ons.{i}.name"
            )


def _check_new_reservation_end(end: datetime, record: ClusterRecord) -> None:
    if record.billing_type == "ON_DEMAND":
        raise invalid(
            "reservation_end_time is only accepted for prepaid clusters; this cluster is ON_DEMAND",
            "reservation_end_time",
        )
    start = record.echoed.get("reservation_start_time")
    if start is not None and end <= datetime.fromisoformat(start):
        raise invalid(
            f"reservation_end_time must be after reservation_start_time ({start}); got {end.isoformat()}",
            "reservation_end_time",
        )


def _check_split(billing_type: str, num_gpus: int, reserved: int | None, capacity_pool: int | None) -> None:
    """The reserved and capacity-pool shares are whole nodes and each at most ``num_gpus``."""
    for field, share in (("num_reserved_gpus", reserved), ("num_capacity_pool_gpus", capacity_pool)):
        if share is None:
            continue
        check_gpu_count(field, share, 0)
        if share > num_gpus:
            raise invalid(f"{field} must not exceed num_gpus ({num_gpus}); got {share}", field)
    if reserved and billing_type != "RESERVED":
        raise invalid(
            f"num_reserved_gpus applies to RESERVED clusters only; got {reserved} with billing_type {billing_type}",
            "num_reserved_gpus",
        )
