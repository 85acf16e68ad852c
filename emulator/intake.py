"""How an accepted create request becomes a cluster record, and how an update's settings apply to one.

Node counts are not handled here: the simulation adds and removes nodes (see :mod:`together_clusters.emulator.simulation`).
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from together_clusters.platform import ComputeClass

from .clock import nominal
from .faults import ProvisioningOutcome
from .lifecycle import Duration, cluster_schedule, control_plane_schedule
from .records import ClusterRecord, NodeRecord
from .shapes import ClusterCreateRequest, ClusterUpdateRequest, RegionDriverVersion

# Create-time fields the response echoes back unchanged when given.
_ECHOED_CREATE_FIELDS = (
    "capacity_pool_id",
    "cluster_config",
    "install_traefik",
    "oidc_config",
    "reservation_end_time",
    "reservation_start_time",
    "slurm_shm_size_gib",
)


def new_record(
    req: ClusterCreateRequest,
    *,
    seq: int,
    owner: str,
    default_project_id: str,
    driver: RegionDriverVersion,
    outcome: ProvisioningOutcome,
    now: float,
    duration: Duration = nominal,
) -> ClusterRecord:
    """The record of a cluster created at ``now`` from a validated request, before any node exists."""
    reserved = req.num_reserved_gpus
    if reserved is None:
        reserved = req.num_gpus if req.billing_type == "RESERVED" else 0
    return ClusterRecord(
        cluster_id=str(uuid.uuid4()),
        seq=seq,
        owner=owner,
        project_id=req.project_id or default_project_id,
        cluster_name=req.cluster_name,
        region=req.region,
        gpu_type=req.gpu_type,
        billing_type=req.billing_type,
        cluster_type=req.cluster_type or "KUBERNETES",
        num_gpus=req.num_gpus,
        desired_preemptible_gpus=req.num_preemptible_gpus or 0,
        num_reserved_gpus=reserved,
        num_capacity_pool_gpus=req.num_capacity_pool_gpus or 0,
        driver=driver.model_dump(),
        created_at=now,
        kube_token=secrets.token_urlsafe(32),
        outcome=outcome,
        schedule=cluster_schedule(now, outcome, duration),
        control_plane=NodeRecord(
            node_id=f"{req.cluster_name}-control-plane-0",
            instance_id=f"i-{secrets.token_hex(8)}",
            compute_class=ComputeClass.STANDARD,
            schedule=control_plane_schedule(now, duration),
        ),
        add_ons=[a.model_dump(mode="json", exclude_none=True) | {"state": {}} for a in req.add_ons or []],
        echoed=_echoed(req),
        auto_scale=bool(req.auto_scale),
        auto_scale_max_gpus=req.auto_scale_max_gpus if req.auto_scale else None,
    )


def apply_settings(record: ClusterRecord, req: ClusterUpdateRequest) -> None:
    """Apply the fields of a validated update other than ``num_gpus`` and ``num_preemptible_gpus``.

    Call it after ``num_gpus`` changed: the reserved and capacity-pool shares never exceed it.
    """
    if req.num_reserved_gpus is not None:
        record.num_reserved_gpus = req.num_reserved_gpus
    if req.num_capacity_pool_gpus is not None:
        record.num_capacity_pool_gpus = req.num_capacity_pool_gpus
    record.num_reserved_gpus = min(record.num_reserved_gpus, record.num_gpus)
    record.num_capacity_pool_gpus = min(record.num_capacity_pool_gpus, record.num_gpus)
    if req.cluster_type is not None:
        record.cluster_type = req.cluster_type
    given = req.model_dump(mode="json", exclude_none=True, include={"cluster_config", "reservation_end_time"})
    record.echoed.update(given)
    for update in req.add_ons or []:
        add_on = next(a for a in record.add_ons if a["name"] == update.name)
        if update.config is not None:
            add_on["config"] = _merge(add_on.get("config") or {}, update.config.model_dump(exclude_none=True))


def _echoed(req: ClusterCreateRequest) -> dict[str, Any]:
    echoed = req.model_dump(mode="json", include=set(_ECHOED_CREATE_FIELDS), exclude_none=True)
    if req.duration_days is not None:
        echoed["duration_hours"] = req.duration_days * 24
    return echoed


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``update`` merged in, nested dicts merged key by key."""
    merged = dict(base)
    for key, value in update.items():
        merged[key] = (
            _merge(merged[key], value)
            if isinstance(value, dict) and isinstance(merged.get(key), dict)
            else value
        )
    return merged
