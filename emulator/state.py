"""The simulated platform: clusters, nodes, preemptible pools, preemption and faults, on an emulated clock.

Nothing here knows about HTTP. Every operation runs under one lock: it first brings the simulation up to
the clock's "now" (applying due node removals, deletions and preemptible fills in time order), then does
its work, then persists. Nothing runs in the background, so the same calls at the same emulated times
always give the same result.
"""

from __future__ import annotations

import secrets
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from provider.models import (
    REASON_PREEMPTED,
    REASON_SCALED_DOWN,
    REASON_SCALED_UP,
    Cluster,
    ClusterCreateRequest,
    ClusterDeleteResponse,
    ClusterList,
    ClusterUpdateRequest,
    RegionList,
)

from . import catalog, render, validation
from .catalog import DEFAULT_PREEMPTIBLE_POOL_GPUS, GPUS_PER_NODE
from .clock import EmulatedClock, to_datetime
from .errors import conflict, invalid, not_found
from .lifecycle import (
    DATA_PLANE_START_S,
    DEFAULT_GRACE_SECONDS,
    DEFAULT_SPEED,
    DELETE_DURATION_S,
    PREEMPTIBLE_FILL_DELAY_S,
    cluster_schedule,
    control_plane_schedule,
    node_schedule,
)
from .records import (
    ClusterRecord,
    ComputeClass,
    EventRecord,
    FaultRule,
    NodeRecord,
    ProvisioningOutcome,
    Timed,
)
from .store import Store

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


def pool_key(region: str, gpu_type: str) -> str:
    return f"{region}/{gpu_type}"


def _default_pools() -> dict[str, int]:
    return {pool_key(r, g): DEFAULT_PREEMPTIBLE_POOL_GPUS for r, g in catalog.pool_keys()}


class Platform:
    """The emulated compute platform. Thread-safe; every public method is one atomic operation.

    With a ``store`` holding a saved platform, the clusters, pools, faults and clock are restored from it;
    ``speed`` and ``grace_seconds`` then override the saved values only when given.
    """

    def __init__(
        self,
        clock: EmulatedClock | None = None,
        grace_seconds: float | None = None,
        store: Store | None = None,
        speed: float | None = None,
    ) -> None:
        self._lock = threading.RLock()
        self._store = store
        self._saved: dict[str, str] = {}
        self.clusters: dict[str, ClusterRecord] = {}
        self.pools: dict[str, int] = _default_pools()
        self.faults: list[FaultRule] = []
        self.provisioning_faults: list[ProvisioningOutcome] = []
        self.seq = 0
        self._initial_grace = DEFAULT_GRACE_SECONDS if grace_seconds is None else float(grace_seconds)
        self.grace_seconds = self._initial_grace
        meta = self._load() if store is not None else None
        if meta is not None:
            if grace_seconds is None:
                self.grace_seconds = float(meta["grace_seconds"])
            saved_speed = float(meta["speed"])
            self.clock = EmulatedClock(
                start=float(meta["now"]), speed=saved_speed if speed is None else speed
            )
        else:
            self.clock = clock or EmulatedClock(speed=DEFAULT_SPEED if speed is None else speed)
        with self._op():
            pass

    # --- public API -------------------------------------------------------------------------------

    @staticmethod
    def list_regions() -> RegionList:
        return RegionList(regions=catalog.regions())

    def create_cluster(self, owner: str, default_project_id: str, req: ClusterCreateRequest) -> Cluster:
        driver = validation.check_create(req)
        with self._op() as now:
            if any(
                c.owner == owner and c.cluster_name == req.cluster_name and not c.deleting
                for c in self.clusters.values()
            ):
                raise conflict(
                    f"cluster_name {req.cluster_name!r} is already used by another cluster", "cluster_name"
                )
            outcome: ProvisioningOutcome = (
                self.provisioning_faults.pop(0) if self.provisioning_faults else "ready"
            )
            self.seq += 1
            cluster_id = str(uuid.uuid4())
            record = ClusterRecord(
                cluster_id=cluster_id,
                seq=self.seq,
                owner=owner,
                project_id=req.project_id or default_project_id,
                cluster_name=req.cluster_name,
                region=req.region,
                gpu_type=req.gpu_type,
                billing_type=req.billing_type,
                cluster_type=req.cluster_type or "KUBERNETES",
                num_gpus=req.num_gpus,
                desired_preemptible_gpus=req.num_preemptible_gpus or 0,
                num_reserved_gpus=(
                    req.num_reserved_gpus
                    if req.num_reserved_gpus is not None
                    else (req.num_gpus if req.billing_type == "RESERVED" else 0)
                ),
                num_capacity_pool_gpus=req.num_capacity_pool_gpus or 0,
                driver=driver.model_dump(),
                created_at=now,
                kube_token=secrets.token_urlsafe(32),
                outcome=outcome,
                schedule=cluster_schedule(now, outcome),
                control_plane=NodeRecord(
                    node_id=f"{req.cluster_name}-control-plane-0",
                    instance_id=f"i-{secrets.token_hex(8)}",
                    compute_class="standard",
                    schedule=control_plane_schedule(now),
                ),
                add_ons=[
                    a.model_dump(mode="json", exclude_none=True) | {"state": {}} for a in req.add_ons or []
                ],
                volumes=_volumes(req),
                echoed={
                    f: v
                    for f in _ECHOED_CREATE_FIELDS
                    if (v := req.model_dump(mode="json", include={f}, exclude_none=True).get(f)) is not None
                },
            )
            for _ in range(req.num_gpus // GPUS_PER_NODE):
                self._add_node(
                    record, "standard", now + DATA_PLANE_START_S, boots=outcome != "stuck", event=False
                )
            self.clusters[cluster_id] = record
            self._want_fill(record, now)
            return render.cluster(record, now)

    def get_cluster(self, owner: str, cluster_id: str) -> Cluster:
        with self._op() as now:
            return render.cluster(self._owned(owner, cluster_id), now)

    def list_clusters(self, owner: str, project_id: str | None = None) -> ClusterList:
        with self._op() as now:
            return ClusterList(
                clusters=[
                    render.cluster(c, now)
                    for c in self._ordered()
                    if c.owner == owner and (project_id is None or c.project_id == project_id)
                ]
            )

    def update_cluster(self, owner: str, cluster_id: str, req: ClusterUpdateRequest) -> Cluster:
        with self._op() as now:
            record = self._owned(owner, cluster_id)
            if record.deleting:
                raise conflict(f"cluster {cluster_id} is being deleted and can no longer be updated")
            validation.check_update(
                req,
                record.billing_type,
                record.num_gpus,
                "capacity_pool_id" in record.echoed,
                {a["name"] for a in record.add_ons},
            )
            if req.cluster_type == "SLURM" and not record.echoed.get("slurm_shm_size_gib"):
                raise invalid(
                    "cluster_type SLURM needs slurm_shm_size_gib, which this cluster lacks", "cluster_type"
                )
            if req.num_gpus is not None:
                self._scale_standard(record, req.num_gpus, now)
            if req.num_preemptible_gpus is not None:
                self._set_desired_preemptible(record, req.num_preemptible_gpus, now)
            if req.num_reserved_gpus is not None:
                record.num_reserved_gpus = req.num_reserved_gpus
            record.num_reserved_gpus = min(record.num_reserved_gpus, record.num_gpus)
            if req.num_capacity_pool_gpus is not None:
                record.num_capacity_pool_gpus = req.num_capacity_pool_gpus
            if req.cluster_type is not None:
                record.cluster_type = req.cluster_type
            if req.cluster_config is not None:
                record.echoed["cluster_config"] = req.cluster_config.model_dump(
                    mode="json", exclude_none=True
                )
            if req.reservation_end_time is not None:
                record.echoed["reservation_end_time"] = req.model_dump(mode="json")["reservation_end_time"]
            for update in req.add_ons or []:
                add_on = next(a for a in record.add_ons if a["name"] == update.name)
                if update.config is not None:
                    add_on["config"] = _merge(
                        add_on.get("config") or {}, update.config.model_dump(exclude_none=True)
                    )
            return render.cluster(record, now)

    def delete_cluster(self, owner: str, cluster_id: str) -> ClusterDeleteResponse:
        with self._op() as now:
            record = self._owned(owner, cluster_id)
            if not record.deleting:
                record.schedule = [t for t in record.schedule if t.at <= now]
                record.schedule.append(Timed(phase="CLUSTER_PHASE_DELETING", at=now))
                record.nodes = [n for n in record.nodes if n.appears_at <= now]
                record.deleting_since = now
                record.delete_done_at = now + DELETE_DURATION_S
                record.fill_at = None
            return ClusterDeleteResponse(cluster_id=cluster_id)

    # --- admin API --------------------------------------------------------------------------------

    def preempt(self, cluster_id: str, count: int = 1) -> dict[str, Any]:
        """Reclaim ``count`` preemptible nodes: cordon now, delete after the grace period."""
        if count < 1:
            raise invalid(f"count must be at least 1; got {count}", "count")
        with self._op() as now:
            record = self.clusters.get(cluster_id)
            if record is None:
                raise not_found(f"cluster {cluster_id} not found", "cluster_id")
            candidates = [
                n for n in record.live("preemptible") if n.cordoned_at is None and n.appears_at <= now
            ]
            if len(candidates) < count:
                raise conflict(
                    f"count must not exceed the cluster's {len(candidates)} preemptible node(s) that can be "
                    f"preempted; got {count}",
                    "count",
                )
            remove_at = now + self.grace_seconds
            for node in candidates[:count]:
                node.cordoned_at = now
                node.remove_at = remove_at
                record.events.append(
                    EventRecord(
                        node_id=node.node_id,
                        reason=REASON_PREEMPTED,
                        message=(
                            f"Node {node.node_id} is being preempted: cordoned, pods have "
                            f"{self.grace_seconds:g}s to terminate before the node is deleted"
                        ),
                        at=now,
                    )
                )
            return {
                "cluster_id": cluster_id,
                "preempted": [n.node_id for n in candidates[:count]],
                "preempted_at": to_datetime(now).isoformat(),
                "delete_at": to_datetime(remove_at).isoformat(),
            }

    def set_capacity(self, region: str, gpu_type: str, preemptible_gpus: int) -> dict[str, Any]:
        """Set the free preemptible GPUs of a pool; clusters short of their target get refilled."""
        catalog.check_offered(region, gpu_type)
        if preemptible_gpus < 0:
            raise invalid(f"preemptible_gpus must be >= 0; got {preemptible_gpus}", "preemptible_gpus")
        with self._op() as now:
            key = pool_key(region, gpu_type)
            self.pools[key] = preemptible_gpus
            self._want_fill_pool(key, now)
            return self._pool_info(key)

    def capacity(self) -> list[dict[str, Any]]:
        with self._op():
            return [self._pool_info(key) for key in self.pools]

    def add_fault(self, **fields: Any) -> FaultRule:
        rule = FaultRule(id=f"fault-{uuid.uuid4().hex[:8]}", **fields)
        if rule.status is None and rule.delay_s == 0:
            raise invalid("a fault needs a status, a delay_s, or both", "status")
        with self._op():
            self.faults.append(rule)
            return rule

    def list_faults(self) -> list[FaultRule]:
        with self._op():
            return list(self.faults)

    def clear_faults(self) -> None:
        with self._op():
            self.faults.clear()
            self.provisioning_faults.clear()

    def take_fault(self, method: str, path: str) -> FaultRule | None:
        """The first fault matching the request, counted down; ``None`` when no fault applies."""
        with self._op():
            for rule in self.faults:
                if rule.matches(method, path):
                    rule.count -= 1
                    if rule.count <= 0:
                        self.faults.remove(rule)
                    return rule.model_copy()
            return None

    def add_provisioning_faults(self, outcome: ProvisioningOutcome, count: int = 1) -> list[str]:
        if count < 1:
            raise invalid(f"count must be at least 1; got {count}", "count")
        with self._op():
            self.provisioning_faults.extend([outcome] * count)
            return list(self.provisioning_faults)

    def pending_provisioning_faults(self) -> list[str]:
        with self._op():
            return list(self.provisioning_faults)

    def clock_info(self) -> dict[str, Any]:
        with self._op() as now:
            return {"now": to_datetime(now).isoformat(), "now_s": now, "speed": self.clock.speed}

    def set_clock(self, speed: float | None = None, advance_s: float | None = None) -> dict[str, Any]:
        with self._lock:
            try:
                if speed is not None:
                    self.clock.set_speed(speed)
                if advance_s is not None:
                    self.clock.advance(advance_s)
            except ValueError as exc:
                raise invalid(str(exc), "speed" if speed is not None and speed < 0 else "advance_s") from exc
            return self.clock_info()

    def settings(self, grace_seconds: float | None = None) -> dict[str, Any]:
        if grace_seconds is not None and grace_seconds < 0:
            raise invalid(f"grace_seconds must be >= 0; got {grace_seconds}", "grace_seconds")
        with self._op():
            if grace_seconds is not None:
                self.grace_seconds = float(grace_seconds)
            return {"grace_seconds": self.grace_seconds}

    def reset(self) -> None:
        """Forget every cluster, fault and pool change; the clock keeps running."""
        with self._op():
            self.clusters.clear()
            self.pools = _default_pools()
            self.faults.clear()
            self.provisioning_faults.clear()
            self.grace_seconds = self._initial_grace

    def all_clusters(self) -> list[dict[str, Any]]:
        """Every cluster of every owner, for tests that check what exists."""
        with self._op() as now:
            return [
                render.cluster(c, now).model_dump(mode="json", exclude_none=True) | {"owner": c.owner[:12]}
                for c in self._ordered()
            ]

    def flush(self) -> None:
        """Persist the clock (and everything else) now, e.g. before shutting down."""
        with self._op():
            pass

    # --- the simulation -----------------------------------------------------------------------

    @contextmanager
    def _op(self) -> Iterator[float]:
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            try:
                yield now
            finally:
                self._persist(now)

    def _advance(self, now: float) -> None:
        """Apply every timed action due by ``now``, earliest first."""
        while True:
            due = self._next_action(now)
            if due is None:
                return
            at, kind, record, node = due
            if kind == "remove" and node is not None:
                self._remove_preempted(record, node, at)
            elif kind == "delete":
                self._finish_delete(record, at)
            else:
                self._fill(record, at)

    def _next_action(self, now: float) -> tuple[float, str, ClusterRecord, NodeRecord | None] | None:
        best: tuple[float, int, int, str, ClusterRecord, NodeRecord | None] | None = None
        for record in self.clusters.values():
            candidates: list[tuple[float, int, str, NodeRecord | None]] = [
                (n.remove_at, 0, "remove", n) for n in record.nodes if n.remove_at is not None
            ]
            if record.delete_done_at is not None:
                candidates.append((record.delete_done_at, 1, "delete", None))
            if record.fill_at is not None:
                candidates.append((record.fill_at, 2, "fill", None))
            for at, order, kind, node in candidates:
                if at <= now and (best is None or (at, order, record.seq) < best[:3]):
                    best = (at, order, record.seq, kind, record, node)
        return None if best is None else (best[0], best[3], best[4], best[5])

    def _remove_preempted(self, record: ClusterRecord, node: NodeRecord, at: float) -> None:
        # The reclaimed GPUs went to whoever preempted them, so the pool does not get them back.
        record.nodes.remove(node)
        node.remove_at = None
        node.deleted_at = at
        record.deleted_nodes.append(node)
        self._want_fill(record, at)

    def _finish_delete(self, record: ClusterRecord, at: float) -> None:
        returned = GPUS_PER_NODE * len([n for n in record.live("preemptible") if n.cordoned_at is None])
        key = pool_key(record.region, record.gpu_type)
        del self.clusters[record.cluster_id]
        self.pools[key] = self.pools.get(key, 0) + returned
        if returned:
            self._want_fill_pool(key, at)

    def _fill(self, record: ClusterRecord, at: float) -> None:
        record.fill_at = None
        key = pool_key(record.region, record.gpu_type)
        missing = (record.desired_preemptible_gpus - record.allocated_preemptible_gpus) // GPUS_PER_NODE
        granted = max(0, min(missing, self.pools.get(key, 0) // GPUS_PER_NODE))
        for _ in range(granted):
            self.pools[key] -= GPUS_PER_NODE
            self._add_node(record, "preemptible", at, boots=True, event=True)

    def _want_fill(self, record: ClusterRecord, at: float) -> None:
        """Have the fulfillment worker look at the cluster soon, if it is short and its pool is not empty."""
        short = record.desired_preemptible_gpus > record.allocated_preemptible_gpus
        has_free = self.pools.get(pool_key(record.region, record.gpu_type), 0) >= GPUS_PER_NODE
        if record.deleting or not short or not has_free:
            return
        due = at + PREEMPTIBLE_FILL_DELAY_S
        record.fill_at = due if record.fill_at is None else min(record.fill_at, due)

    def _want_fill_pool(self, key: str, at: float) -> None:
        for record in self._ordered():
            if pool_key(record.region, record.gpu_type) == key:
                self._want_fill(record, at)

    def _add_node(
        self, record: ClusterRecord, compute_class: ComputeClass, appears_at: float, boots: bool, event: bool
    ) -> NodeRecord:
        record.node_seq += 1
        node = NodeRecord(
            node_id=f"{record.cluster_name}-{compute_class}-{record.node_seq}",
            instance_id=f"i-{secrets.token_hex(8)}",
            compute_class=compute_class,
            schedule=node_schedule(appears_at, boots),
        )
        record.nodes.append(node)
        if event:
            record.events.append(
                EventRecord(
                    node_id=node.node_id,
                    reason=REASON_SCALED_UP,
                    message=f"Added {compute_class} node {node.node_id} ({GPUS_PER_NODE} GPUs)",
                    at=appears_at,
                )
            )
        return node

    def _drop_node(self, record: ClusterRecord, node: NodeRecord, at: float) -> None:
        """Scale a node down: gone at once, recorded as TogetherScaledDown unless it never appeared."""
        record.nodes.remove(node)
        if node.appears_at > at:
            return
        node.deleted_at = at
        record.deleted_nodes.append(node)
        record.events.append(
            EventRecord(
                node_id=node.node_id,
                reason=REASON_SCALED_DOWN,
                message=f"Removed {node.compute_class} node {node.node_id} ({GPUS_PER_NODE} GPUs)",
                at=at,
            )
        )

    def _scale_standard(self, record: ClusterRecord, num_gpus: int, now: float) -> None:
        target = num_gpus // GPUS_PER_NODE
        current = record.live("standard")
        for node in reversed(current[target:]):
            self._drop_node(record, node, now)
        appears_at = max(now, record.created_at + DATA_PLANE_START_S)
        for _ in range(target - len(current)):
            self._add_node(record, "standard", appears_at, boots=record.outcome != "stuck", event=True)
        record.num_gpus = num_gpus

    def _set_desired_preemptible(self, record: ClusterRecord, desired: int, now: float) -> None:
        record.desired_preemptible_gpus = desired
        key = pool_key(record.region, record.gpu_type)
        released = 0
        # Cordoned nodes are already on their way out; release healthy ones, newest first.
        for node in reversed([n for n in record.live("preemptible") if n.cordoned_at is None]):
            if record.allocated_preemptible_gpus <= desired:
                break
            self._drop_node(record, node, now)
            released += GPUS_PER_NODE
        if released:
            self.pools[key] = self.pools.get(key, 0) + released
            self._want_fill_pool(key, now)
        self._want_fill(record, now)

    # --- helpers ------------------------------------------------------------------------------

    def _owned(self, owner: str, cluster_id: str) -> ClusterRecord:
        record = self.clusters.get(cluster_id)
        if record is None or record.owner != owner:
            raise not_found(f"cluster {cluster_id} not found", "cluster_id")
        return record

    def _ordered(self) -> list[ClusterRecord]:
        return sorted(self.clusters.values(), key=lambda c: c.seq)

    def _pool_info(self, key: str) -> dict[str, Any]:
        region, gpu_type = key.split("/", 1)
        members = [c for c in self.clusters.values() if pool_key(c.region, c.gpu_type) == key]
        return {
            "region": region,
            "gpu_type": gpu_type,
            "preemptible_gpus": self.pools[key],
            "allocated_preemptible_gpus": sum(c.allocated_preemptible_gpus for c in members),
            "desired_preemptible_gpus": sum(c.desired_preemptible_gpus for c in members if not c.deleting),
        }

    # --- persistence --------------------------------------------------------------------------

    def _meta(self, now: float) -> dict[str, Any]:
        return {
            "now": now,
            "speed": self.clock.speed,
            "grace_seconds": self.grace_seconds,
            "pools": self.pools,
            "faults": [f.model_dump() for f in self.faults],
            "provisioning_faults": self.provisioning_faults,
            "seq": self.seq,
        }

    def _persist(self, now: float) -> None:
        if self._store is None:
            return
        current = {cid: c.model_dump_json() for cid, c in self.clusters.items()}
        changed = {cid: data for cid, data in current.items() if self._saved.get(cid) != data}
        removed = set(self._saved) - set(current)
        self._store.save(self._meta(now), changed, removed)
        self._saved = current

    def _load(self) -> dict[str, Any] | None:
        assert self._store is not None
        meta, rows = self._store.load()
        for data in rows:
            record = ClusterRecord.model_validate_json(data)
            self.clusters[record.cluster_id] = record
            self._saved[record.cluster_id] = data
        if meta is None:
            return None
        self.pools = _default_pools() | {k: int(v) for k, v in meta["pools"].items()}
        self.faults = [FaultRule.model_validate(f) for f in meta["faults"]]
        self.provisioning_faults = list(meta["provisioning_faults"])
        self.seq = int(meta["seq"])
        return meta


def _volumes(req: ClusterCreateRequest) -> list[dict[str, Any]]:
    if req.shared_volume is not None:
        v = req.shared_volume
        return [
            {
                "volume_id": f"vol-{uuid.uuid4().hex[:12]}",
                "volume_name": v.volume_name,
                "size_tib": v.size_tib,
                "status": "Available",
            }
        ]
    if req.volume_id is not None:
        return [
            {"volume_id": req.volume_id, "volume_name": req.volume_id, "size_tib": 1, "status": "Available"}
        ]
    return []


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        merged[key] = (
            _merge(merged[key], value)
            if isinstance(value, dict) and isinstance(merged.get(key), dict)
            else value
        )
    return merged
