"""Capacity pools: GPUs reserved ahead in one region and GPU type, which clusters draw on.

The SDK documents only the cluster's side: ``capacity_pool_id`` at create ("ID of the capacity pool to use
for the cluster") and ``num_capacity_pool_gpus`` at create and update ("Number of GPUs to allocate from the
capacity pool. Must be a multiple of 8 and not exceed num_gpus"). Nothing in the API creates or lists
pools (they are arranged with Together), so the emulator's pools are defined through its admin API.

What a pool has drawn is the sum of ``num_capacity_pool_gpus`` over the live clusters created with its id;
a cluster being deleted no longer draws (its GPUs are free as soon as the delete is accepted, as a
reservation's accounting would free them, rather than when the last node is gone). A request is refused
(400, the API's invalid-argument refusal) when it names a pool that does not exist or cannot serve the
cluster (another region or GPU type), or when its draw would take the pool past its size. A request that
does not raise a cluster's draw is never refused for the pool, even if the pool shrank under it.

Plain functions of plain data: :class:`~together_clusters.emulator.state.Platform` calls them under its lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from . import catalog
from .catalog import GPUS_PER_NODE
from .errors import invalid
from .records import ClusterRecord

# Where a cluster's pool id is kept: with the other create-time fields the API echoes back.
POOL_FIELD = "capacity_pool_id"


class CapacityPool(BaseModel):
    """A capacity pool: ``size_gpus`` GPUs of ``gpu_type`` in ``region``."""

    pool_id: str
    region: str
    gpu_type: str
    size_gpus: int


def define(pool_id: str, region: str, gpu_type: str, size_gpus: int) -> CapacityPool:
    """A pool as the admin API defines it, checked: an offered region and GPU type, whole nodes."""
    if not pool_id.strip():
        raise invalid(f"pool_id must not be empty; got {pool_id!r}", "pool_id")
    catalog.check_offered(region, gpu_type)
    if size_gpus < 0 or size_gpus % GPUS_PER_NODE:
        raise invalid(
            f"size_gpus must be a non-negative multiple of {GPUS_PER_NODE}; got {size_gpus}", "size_gpus"
        )
    return CapacityPool(pool_id=pool_id, region=region, gpu_type=gpu_type, size_gpus=size_gpus)


def pool_of(record: ClusterRecord) -> str | None:
    """The id of the pool a cluster was created with, if any."""
    pool_id = record.echoed.get(POOL_FIELD)
    return None if pool_id is None else str(pool_id)


def drawn(pool_id: str, clusters: Iterable[ClusterRecord], excluding: str | None = None) -> int:
    """The GPUs the live clusters (but ``excluding``, a cluster id) draw from the pool."""
    return sum(
        c.num_capacity_pool_gpus
        for c in clusters
        if pool_of(c) == pool_id and not c.deleting and c.cluster_id != excluding
    )


def info(pool: CapacityPool, clusters: Iterable[ClusterRecord]) -> dict[str, Any]:
    """What the admin API shows of a pool: its definition, what is drawn and what is free."""
    used = drawn(pool.pool_id, clusters)
    return pool.model_dump() | {"drawn_gpus": used, "free_gpus": max(0, pool.size_gpus - used)}


def check_usable(pools: dict[str, CapacityPool], pool_id: str, region: str, gpu_type: str) -> CapacityPool:
    """The pool a create names, refused unless it exists and serves the cluster's region and GPU type."""
    pool = pools.get(pool_id)
    if pool is None:
        known = ", ".join(sorted(pools)) or "none"
        raise invalid(f"capacity_pool_id {pool_id!r} is not a capacity pool; the pools: {known}", POOL_FIELD)
    for field, wanted, offered in (("region", region, pool.region), ("gpu_type", gpu_type, pool.gpu_type)):
        if wanted != offered:
            raise invalid(
                f"capacity pool {pool_id!r} is {field} {offered!r}; the cluster's {field} is {wanted!r}",
                POOL_FIELD,
            )
    return pool


def check_draw(
    pool: CapacityPool, draw: int, clusters: Iterable[ClusterRecord], excluding: str | None = None
) -> None:
    """Refuse a draw of ``draw`` GPUs that, with what the other clusters draw, would exceed the pool."""
    others = drawn(pool.pool_id, clusters, excluding)
    free = max(0, pool.size_gpus - others)
    if draw > free:
        raise invalid(
            f"num_capacity_pool_gpus {draw} exceeds what capacity pool {pool.pool_id!r} has free: it has "
            f"{pool.size_gpus} GPUs, {others} drawn by other clusters, {free} free",
            "num_capacity_pool_gpus",
        )


def draw_after_update(record: ClusterRecord, num_gpus: int | None, num_capacity_pool_gpus: int | None) -> int:
    """A cluster's draw once an update applies: the share given (else kept), never above ``num_gpus``.

    The same rule as :func:`together_clusters.emulator.intake.apply_settings`, before the update applies.
    """
    share = record.num_capacity_pool_gpus if num_capacity_pool_gpus is None else num_capacity_pool_gpus
    return min(share, record.num_gpus if num_gpus is None else num_gpus)


def to_json(pools: dict[str, CapacityPool]) -> list[dict[str, Any]]:
    """The pools as saved in the state file."""
    return [p.model_dump() for p in pools.values()]


def from_json(saved: list[dict[str, Any]]) -> dict[str, CapacityPool]:
    """The pools read back from the state file."""
    return {p.pool_id: p for p in (CapacityPool.model_validate(item) for item in saved)}
