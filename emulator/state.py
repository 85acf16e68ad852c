"""The emulated platform: the compute API's operations and the admin API's, each one atomic.

Nothing here knows about HTTP. Every operation runs under one lock: it first brings the simulation up to
the clock's "now" (see :mod:`together_clusters.emulator.simulation`), then does its work, then persists. Nothing runs in the
background, so the same calls at the same emulated times always give the same result.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from . import capacity_pools, catalog, intake, remediations, render, storage, validation
from .capacity_pools import CapacityPool
from .clock import EmulatedClock, to_datetime
from .errors import conflict, invalid, not_found
from .faults import FailedOutcome, FaultQueue, FaultRule, FaultSpec
from .lifecycle import DEFAULT_GRACE_SECONDS, DEFAULT_SPEED
from .records import ClusterRecord, RemediationRecord
from .remediations import RemediationTimings, RemediationTransition
from .shapes import (
    ClusterCreateRequest,
    ClusterUpdateRequest,
    RemediationApproveRequest,
    RemediationCreateRequest,
    RemediationRejectRequest,
    StorageCreateRequest,
    StorageUpdateRequest,
)
from .simulation import Simulation, default_pools, pool_key
from .store import Store

# Beyond this, durations shrink below what the platform can tell apart.
MAX_SPEED = 1_000_000.0


class Platform:
    """The emulated compute platform. Thread-safe; every public method is one atomic operation.

    With a ``store`` holding a saved platform, the clusters, pools, faults and clock are restored from it;
    ``speed`` and ``grace_seconds`` then override the saved values only when given. Replies are JSON-ready
    dicts shaped exactly like the official SDK's types; ``extra_fields`` adds the fields the SDK does not
    define (each GPU node's ``compute_class`` and ``labels``). A create must select a driver, as in the real
    API; ``default_driver`` picks the region's newest for a create that selects none.
    """

    def __init__(
        self,
        clock: EmulatedClock | None = None,
        grace_seconds: float | None = None,
        store: Store | None = None,
        speed: float | None = None,
        extra_fields: bool = False,
        default_driver: bool = False,
    ) -> None:
        self.extra_fields = extra_fields
        self.default_driver = default_driver
        self._lock = threading.RLock()
        self._store = store
        self._sim = Simulation(self._duration, self._remediation_entered)
        self._volumes = storage.Volumes()
        # Each request whose body had fields the API does not define, and those fields (see
        # emulator/unknown_fields.py); kept for tests in memory only, forgotten on reset and restart.
        self._ignored_fields: list[dict[str, Any]] = []
        # The capacity pools clusters draw on, by id (see emulator/capacity_pools.py).
        self._capacity_pools: dict[str, CapacityPool] = {}
        self._faults = FaultQueue()
        # The clusters the running operation changed (see _op).
        self._touched: set[str] = set()
        self._initial_grace = DEFAULT_GRACE_SECONDS if grace_seconds is None else float(grace_seconds)
        self.grace_seconds = self._initial_grace
        # How long (emulated seconds) a new cluster stays out of listings; 0: listed at once.
        self.list_lag_s = 0.0
        # Whether a create is refused (409) while another live cluster of the owner has the same name.
        self.unique_names = True
        saved = self._load() if store is not None else None
        if saved is not None:
            if grace_seconds is None:
                self.grace_seconds = float(saved["grace_seconds"])
            self.list_lag_s = float(saved.get("list_lag_s", 0.0))
            self.unique_names = bool(saved.get("unique_names", True))
            if "remediation_timings" in saved:
                self._sim.remediation_timings = RemediationTimings.model_validate(
                    saved["remediation_timings"]
                )
            start, saved_speed = float(saved["now"]), float(saved["speed"])
            self.clock = EmulatedClock(start=start, speed=saved_speed if speed is None else speed)
        else:
            self.clock = clock or EmulatedClock(speed=DEFAULT_SPEED if speed is None else speed)
        self.flush()

    # --- the compute API ------------------------------------------------------------------------

    @staticmethod
    def list_regions() -> dict[str, Any]:
        """Every region with its GPU types and driver versions."""
        return {"regions": [r.model_dump(mode="json") for r in catalog.regions()]}

    def create_cluster(
        self, owner: str, default_project_id: str, req: ClusterCreateRequest
    ) -> dict[str, Any]:
        """Create a cluster for ``owner``; it starts QUEUED and provisions on the clock."""
        driver = validation.check_create(req, self.default_driver)
        with self._op(saves="touched") as now:
            if self.unique_names and any(
                c.owner == owner and c.cluster_name == req.cluster_name and not c.deleting
                for c in self._sim.clusters.values()
            ):
                raise conflict(
                    f"cluster_name {req.cluster_name!r} is already used by another cluster", "cluster_name"
                )
            if req.volume_id is not None:
                self._volumes.check_attach(owner, req.volume_id, req.region, self._sim.clusters)
            if req.capacity_pool_id is not None:
                pool = capacity_pools.check_usable(
                    self._capacity_pools, req.capacity_pool_id, req.region, req.gpu_type
                )
                capacity_pools.check_draw(pool, req.num_capacity_pool_gpus or 0, self._sim.clusters.values())
            record = intake.new_record(
                req,
                seq=self._sim.next_seq(),
                owner=owner,
                default_project_id=default_project_id,
                driver=driver,
                outcome=self._faults.next_outcome(),
                now=now,
                duration=self.clock.duration,
            )
            self._sim.add_cluster(record, now)
            if req.shared_volume is not None:
                self._volumes.create(
                    owner, record.project_id, req.shared_volume, now, cluster_id=record.cluster_id
                )
            elif req.volume_id is not None:
                self._volumes.attach(req.volume_id, record.cluster_id)
            self._touched.add(record.cluster_id)
            self._cluster_added(record)
            return self._render(record, now)

    def get_cluster(self, owner: str, cluster_id: str) -> dict[str, Any]:
        """One of ``owner``'s clusters, as of now."""
        with self._op(saves="touched") as now:
            return self._render(self._owned(owner, cluster_id), now)

    def list_clusters(self, owner: str, project_id: str | None = None) -> dict[str, Any]:
        """``owner``'s clusters (of one project, when given), oldest first.

        Clusters newer than the listing lag (see :meth:`settings`) are left out, as an eventually
        consistent listing would; reading one by id shows it at once.
        """
        with self._op(saves="touched") as now:
            listed_before = now - self.list_lag_s
            return {
                "clusters": [
                    self._render(c, now)
                    for c in self._sim.ordered()
                    if c.owner == owner
                    and (project_id is None or c.project_id == project_id)
                    and c.created_at <= listed_before
                ]
            }

    def update_cluster(self, owner: str, cluster_id: str, req: ClusterUpdateRequest) -> dict[str, Any]:
        """Change only the fields given; preemptible nodes follow ``num_preemptible_gpus`` later."""
        with self._op() as now:
            record = self._owned(owner, cluster_id)
            if record.deleting:
                raise conflict(f"cluster {cluster_id} is being deleted and can no longer be updated")
            validation.check_update(req, record)
            self._check_pool_draw(record, req)
            if req.num_gpus is not None:
                self._sim.scale_standard(record, req.num_gpus, now)
            if req.num_preemptible_gpus is not None:
                self._sim.set_desired_preemptible(record, req.num_preemptible_gpus, now)
            intake.apply_settings(record, req)
            return self._render(record, now)

    def delete_cluster(self, owner: str, cluster_id: str) -> dict[str, Any]:
        """Start deleting (again: a no-op); the cluster shows as Deleting until it is gone."""
        with self._op(saves="touched") as now:
            self._sim.start_delete(self._owned(owner, cluster_id), now)
            self._touched.add(cluster_id)
            return {"cluster_id": cluster_id}

    # --- the storage API ------------------------------------------------------------------------

    def create_volume(self, owner: str, default_project_id: str, req: StorageCreateRequest) -> dict[str, Any]:
        """Create a standalone shared volume for ``owner``; it is available at once."""
        with self._op(saves="touched") as now:
            return storage.view(self._volumes.create(owner, default_project_id, req, now))

    def get_volume(self, owner: str, volume_id: str) -> dict[str, Any]:
        """One of ``owner``'s volumes."""
        with self._op(saves="touched"):
            return storage.view(self._volumes.owned(owner, volume_id))

    def list_volumes(self, owner: str, project_id: str | None = None) -> dict[str, Any]:
        """``owner``'s volumes (of one project, when given), oldest first."""
        with self._op(saves="touched"):
            return {"volumes": [storage.view(v) for v in self._volumes.listed(owner, project_id)]}

    def update_volume(self, owner: str, req: StorageUpdateRequest) -> dict[str, Any]:
        """Resize a volume: it can only grow."""
        with self._op(saves="touched"):
            return storage.view(self._volumes.resize(owner, req))

    def delete_volume(self, owner: str, volume_id: str) -> dict[str, Any]:
        """Delete a volume no cluster uses."""
        with self._op(saves="touched"):
            self._volumes.delete(owner, volume_id, self._sim.clusters)
            return {"success": True}

    def all_volumes(self) -> list[dict[str, Any]]:
        """Every volume of every owner with the cluster it is bound to, for tests that check what exists."""
        with self._op(saves="touched"):
            return [
                storage.view(v)
                | {
                    "owner": v.owner[:12],
                    "cluster_id": v.cluster_id,
                    "region": v.region,
                    "project_id": v.project_id,
                    "is_lifecycle_independent": v.lifecycle_independent,
                }
                for v in self._volumes.listed_all()
            ]

    # --- the remediation API (see emulator/remediations.py) -------------------------------------

    def create_remediation(
        self, owner: str, actor: str, cluster_id: str, instance_id: str, req: RemediationCreateRequest
    ) -> dict[str, Any]:
        """A user's remediation of a live instance (``actor`` requested it): PENDING at once."""
        with self._op(saves="touched") as now:
            record = self._owned(owner, cluster_id)
            node = remediations.live_instance(record, instance_id, now)
            rem = remediations.new_remediation(
                record,
                node,
                mode=req.mode,
                trigger=remediations.MANUAL,
                now=now,
                reason=req.reason,
                requested_by=actor,
            )
            self._sim.enter_remediation(record, rem, "PENDING", now)
            self._touched.add(cluster_id)
            return render.remediation(rem)

    def list_remediations(
        self,
        owner: str,
        cluster_id: str,
        instance_id: str,
        *,
        state: list[str] | None = None,
        mode: list[str] | None = None,
        trigger: list[str] | None = None,
        order_by: str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> dict[str, Any]:
        """One page of an instance's remediations (``-``: the whole cluster's), newest first."""
        states = remediations.parse_filter("state", state, remediations.STATES)
        modes = remediations.parse_filter("mode", mode, remediations.MODES)
        triggers = remediations.parse_filter("trigger", trigger, remediations.TRIGGERS)
        with self._op(saves="touched"):
            record = self._owned(owner, cluster_id)
            found = remediations.page(
                record,
                instance_id,
                states=states,
                modes=modes,
                triggers=triggers,
                order_by=order_by,
                page_size=page_size,
                page_token=page_token,
            )
            return {
                "has_next": found.has_next,
                "next_page_token": found.next_page_token,
                "remediations": [render.remediation(r) for r in found.items],
            }

    def get_remediation(
        self, owner: str, cluster_id: str, instance_id: str, remediation_id: str
    ) -> dict[str, Any]:
        """One remediation of one of the cluster's instances, as of now."""
        with self._op(saves="touched"):
            record = self._owned(owner, cluster_id)
            return render.remediation(remediations.find(record, instance_id, remediation_id))

    def approve_remediation(
        self,
        owner: str,
        actor: str,
        cluster_id: str,
        instance_id: str,
        remediation_id: str,
        req: RemediationApproveRequest,
    ) -> dict[str, Any]:
        """Approve one awaiting approval (409 otherwise), perhaps in another mode: PENDING."""
        remediations.check_approve_mode(req.mode)
        with self._op(saves="touched") as now:
            record = self._owned(owner, cluster_id)
            rem = remediations.find(record, instance_id, remediation_id)
            remediations.approve(rem, actor, req.comment, req.mode, now)
            self._sim.enter_remediation(record, rem, "PENDING", now)
            self._touched.add(cluster_id)
            return render.remediation(rem)

    def reject_remediation(
        self,
        owner: str,
        actor: str,
        cluster_id: str,
        instance_id: str,
        remediation_id: str,
        req: RemediationRejectRequest,
    ) -> dict[str, Any]:
        """Reject one awaiting approval (409 otherwise): CANCELLED, with the review recorded."""
        with self._op(saves="touched") as now:
            record = self._owned(owner, cluster_id)
            rem = remediations.find(record, instance_id, remediation_id)
            remediations.reject(rem, actor, req.comment, now)
            self._sim.enter_remediation(record, rem, "CANCELLED", now)
            self._touched.add(cluster_id)
            return render.remediation(rem)

    def cancel_remediation(
        self, owner: str, cluster_id: str, instance_id: str, remediation_id: str
    ) -> dict[str, Any]:
        """Cancel one in PENDING_APPROVAL or PENDING (409 in any other state): CANCELLED."""
        with self._op(saves="touched") as now:
            record = self._owned(owner, cluster_id)
            rem = remediations.find(record, instance_id, remediation_id)
            remediations.check_cancellable(rem)
            self._sim.enter_remediation(record, rem, "CANCELLED", now)
            self._touched.add(cluster_id)
            return render.remediation(rem)

    # --- the admin API --------------------------------------------------------------------------

    def raise_remediation(
        self,
        cluster_id: str,
        instance_id: str,
        mode: str | None = None,
        alert: Literal["xid", "slurm_node_unavailable"] = "xid",
        xid_code: str = "79",
        xid_count: int = 1,
        reason: str | None = None,
        outcome: Literal["succeed", "fail"] = "succeed",
    ) -> dict[str, Any]:
        """What the platform's passive health checks do on a faulty instance: an automated remediation in
        ``mode`` (default HOST_AWARE) with the alert linked, awaiting approval (or PENDING at once on an
        instance with ``auto_remediation_enabled``). ``outcome="fail"``: the repair will fail once it runs."""
        if xid_count < 1:
            raise invalid(f"xid_count must be at least 1; got {xid_count}", "xid_count")
        with self._op() as now:
            record = self._sim.clusters.get(cluster_id)
            if record is None:
                raise not_found(f"cluster {cluster_id} not found", "cluster_id")
            node = remediations.live_instance(record, instance_id, now)
            if alert == "xid":
                linked = remediations.xid_alert(record, node, xid_code, xid_count, now)
                summary = linked["annotation"]["summary_line"]
            else:
                summary = reason or "node not responding"
                linked = remediations.slurm_unavailable_alert(record, node, summary, now)
            rem = remediations.new_remediation(
                record,
                node,
                mode=mode or remediations.DEFAULT_AUTOMATED_MODE,
                trigger=remediations.AUTOMATED,
                now=now,
                reason=reason or summary,
                requested_by=remediations.SYSTEM_ACTOR,
                linked_alerts=[linked],
            )
            rem.outcome = outcome
            first = remediations.first_state(remediations.AUTOMATED, node)
            if first == "PENDING":
                rem.reviewed_by, rem.review_time = remediations.SYSTEM_ACTOR, now
                rem.review_comment = "approved by the platform: auto-remediation is enabled on this instance"
            self._sim.enter_remediation(record, rem, first, now)
            return render.remediation(rem)

    def set_remediation_outcome(
        self, remediation_id: str, outcome: remediations.Outcome, error_message: str | None = None
    ) -> dict[str, Any]:
        """How a remediation ends: ``auto_resolve`` now (one not processed yet), or ``fail``/``succeed`` once
        it has run (one not finished)."""
        with self._op() as now:
            record, rem = self._remediation(remediation_id)
            remediations.check_outcome(rem, outcome)
            if outcome == "auto_resolve":
                self._sim.enter_remediation(record, rem, "AUTO_RESOLVED", now)
            else:
                rem.outcome = outcome
                rem.failure = error_message if outcome == "fail" else None
            return render.remediation(rem)

    def set_auto_remediation(
        self, cluster_id: str, enabled: bool, instance_ids: list[str] | None = None
    ) -> dict[str, Any]:
        """Turn auto-remediation on or off for some (default: every) live instance of a cluster."""
        with self._op():
            record = self._sim.clusters.get(cluster_id)
            if record is None:
                raise not_found(f"cluster {cluster_id} not found", "cluster_id")
            by_id = {n.instance_id: n for n in record.nodes}
            for instance_id in instance_ids or []:
                if instance_id not in by_id:
                    raise not_found(
                        f"instance {instance_id} of cluster {cluster_id} not found; its instances: "
                        f"{', '.join(by_id) or 'none'}",
                        "instance_ids",
                    )
            for node in record.nodes if instance_ids is None else [by_id[i] for i in instance_ids]:
                node.auto_remediation_enabled = enabled
            return {
                "cluster_id": cluster_id,
                "auto_remediation_enabled": {n.instance_id: n.auto_remediation_enabled for n in record.nodes},
            }

    def all_remediations(self) -> list[dict[str, Any]]:
        """Every remediation of every cluster, oldest first, with what the API does not show: the node, every
        state entered (``history``) and the instance that replaced the node."""
        with self._op(saves="touched"):
            return [
                render.remediation_record(r) | {"owner": c.owner[:12]}
                for c in self._sim.ordered()
                for r in c.remediations
            ]

    def preempt(
        self, cluster_id: str, count: int | None = None, node_ids: list[str] | None = None
    ) -> dict[str, Any]:
        """Reclaim ``count`` preemptible nodes (default 1, the oldest) or exactly ``node_ids``: cordon now,
        delete after the grace period."""
        if node_ids is not None:
            if not node_ids:
                raise invalid("node_ids is empty: name at least one node, or give count instead", "node_ids")
            if count is not None and count != len(node_ids):
                raise invalid(
                    f"node_ids names {len(node_ids)} node(s) but count is {count}: give one of the two",
                    "node_ids",
                )
        count = len(node_ids) if node_ids is not None else 1 if count is None else count
        if count < 1:
            raise invalid(f"count must be at least 1; got {count}", "count")
        with self._op(saves="touched") as now:
            record = self._sim.clusters.get(cluster_id)
            if record is None:
                raise not_found(f"cluster {cluster_id} not found", "cluster_id")
            preempted = self._sim.preempt(record, count, self.grace_seconds, now, node_ids)
            self._touched.add(cluster_id)
            return {
                "cluster_id": cluster_id,
                "preempted": [n.node_id for n in preempted],
                "preempted_at": to_datetime(now).isoformat(),
                "delete_at": to_datetime(now + self.clock.duration(self.grace_seconds)).isoformat(),
            }

    def set_demand(
        self, cluster_id: str, pending_gpus: int, busy_node_ids: list[str] | None = None
    ) -> dict[str, Any]:
        """What the scheduler would report of a cluster (the twin reports it itself): GPUs of pods waiting for
        lack of GPUs, and the nodes running a pod. An autoscaling cluster scales on it (see
        :mod:`together_clusters.emulator.autoscaling`)."""
        if pending_gpus < 0:
            raise invalid(f"pending_gpus must be >= 0; got {pending_gpus}", "pending_gpus")
        with self._op() as now:
            record = self._sim.clusters.get(cluster_id)
            if record is None:
                raise not_found(f"cluster {cluster_id} not found", "cluster_id")
            self._sim.report_demand(record, pending_gpus, busy_node_ids or [], now)
            return _autoscaling_info(record)

    def set_capacity(self, region: str, gpu_type: str, preemptible_gpus: int) -> dict[str, Any]:
        """Set the free preemptible GPUs of a pool; clusters short of their target get refilled."""
        catalog.check_offered(region, gpu_type)
        if preemptible_gpus < 0:
            raise invalid(f"preemptible_gpus must be >= 0; got {preemptible_gpus}", "preemptible_gpus")
        with self._op() as now:
            key = pool_key(region, gpu_type)
            self._sim.set_pool(key, preemptible_gpus, now)
            return self._sim.pool_info(key)

    def capacity(self) -> list[dict[str, Any]]:
        """Every preemptible pool: free GPUs, and what its clusters hold and want."""
        with self._op(saves="touched"):
            return [self._sim.pool_info(key) for key in self._sim.pools]

    def set_capacity_pool(self, pool_id: str, region: str, gpu_type: str, size_gpus: int) -> dict[str, Any]:
        """Define (or resize) a capacity pool; clusters already drawing on it keep their draw."""
        pool = capacity_pools.define(pool_id, region, gpu_type, size_gpus)
        with self._op(saves="touched"):
            self._capacity_pools[pool.pool_id] = pool
            return capacity_pools.info(pool, self._sim.clusters.values())

    def capacity_pools(self) -> list[dict[str, Any]]:
        """Every capacity pool: its size, what the live clusters draw and what is free."""
        with self._op(saves="touched"):
            return [
                capacity_pools.info(p, self._sim.clusters.values()) for p in self._capacity_pools.values()
            ]

    def record_ignored_fields(self, method: str, route: str, fields: list[str]) -> None:
        """Note the fields a request sent that the API does not define (and the emulator ignored), if any."""
        if fields:
            with self._lock:
                self._ignored_fields.append({"method": method, "route": route, "fields": list(fields)})

    def ignored_fields(self) -> list[dict[str, Any]]:
        """Every request that sent fields the API does not define, oldest first: method, route and fields."""
        with self._lock:
            return [dict(entry) for entry in self._ignored_fields]

    def clear_ignored_fields(self) -> None:
        """Forget the requests recorded by :meth:`record_ignored_fields`."""
        with self._lock:
            self._ignored_fields = []

    def add_fault(self, spec: FaultSpec) -> FaultRule:
        """Queue an HTTP fault for the requests it matches."""
        with self._op(saves="touched"):
            return self._faults.add(spec)

    def list_faults(self) -> list[FaultRule]:
        """The HTTP faults still to happen."""
        with self._op(saves="touched"):
            return list(self._faults.rules)

    def clear_faults(self) -> None:
        """Forget every pending HTTP and provisioning fault."""
        with self._op(saves="touched"):
            self._faults.clear()

    def take_fault(self, method: str, path: str) -> FaultRule | None:
        """The first fault matching the request, counted down; ``None`` when no fault applies."""
        if not self._faults.rules:
            # Nothing armed (every request but a fault test's): no operation, so nothing to lock or save.
            return None
        with self._op(saves="touched"):
            return self._faults.take(method, path)

    def add_provisioning_faults(self, outcome: FailedOutcome, count: int = 1) -> list[str]:
        """Make the next ``count`` created clusters end their provisioning with ``outcome``."""
        with self._op(saves="touched"):
            self._faults.add_outcomes(outcome, count)
            return list(self._faults.outcomes)

    def pending_provisioning_faults(self) -> list[str]:
        """The outcomes waiting for the next creates, in order."""
        with self._op(saves="touched"):
            return list(self._faults.outcomes)

    def clock_info(self) -> dict[str, Any]:
        """The emulated time (ISO and epoch seconds) and the clock's speed."""
        with self._op(saves="touched") as now:
            return {"now": to_datetime(now).isoformat(), "now_s": now, "speed": self.clock.speed}

    def set_clock(self, speed: float | None = None, advance_s: float | None = None) -> dict[str, Any]:
        """Change the speed and/or jump ahead; both are checked before either applies."""
        if speed is not None and not 0 <= speed <= MAX_SPEED:
            raise invalid(f"speed must be between 0 and {MAX_SPEED:g}; got {speed}", "speed")
        with self._op() as now:
            if advance_s is not None:
                _check_advance(now, advance_s)
                self.clock.advance(advance_s)
            if speed is not None:
                self.clock.set_speed(speed)
        return self.clock_info()

    def settings(
        self,
        grace_seconds: float | None = None,
        list_lag_s: float | None = None,
        unique_names: bool | None = None,
        remediation_timings: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The platform's settings, after changing the ones given.

        ``grace_seconds``: how long a preempted node lives after being cordoned. ``list_lag_s``: how long
        (emulated seconds) a new cluster stays out of listings. ``unique_names``: refuse (409) a create whose
        name a live cluster of the same key has, or allow duplicates. ``remediation_timings``: how long
        (nominal seconds) a remediation stays in each state it leaves by itself (``pending_s``,
        ``quarantining_s``, ``quarantined_s``, ``running_s`` by mode; only those given change), from the next
        state entered on.
        """
        for field, value in (("grace_seconds", grace_seconds), ("list_lag_s", list_lag_s)):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise invalid(f"{field} must be a finite number >= 0; got {value}", field)
        with self._op():
            timings = self._sim.remediation_timings
            if remediation_timings is not None:
                timings = timings.changed(remediation_timings)
            if grace_seconds is not None:
                self.grace_seconds = float(grace_seconds)
            if list_lag_s is not None:
                self.list_lag_s = float(list_lag_s)
            if unique_names is not None:
                self.unique_names = unique_names
            self._sim.remediation_timings = timings
            return {
                "grace_seconds": self.grace_seconds,
                "list_lag_s": self.list_lag_s,
                "unique_names": self.unique_names,
                "remediation_timings": timings.model_dump(),
            }

    def reset(self) -> None:
        """Forget every cluster, fault, pool change and setting; the clock keeps running."""
        with self._op():
            self._sim = Simulation(self._duration, self._remediation_entered)
            self._volumes = storage.Volumes()
            self._capacity_pools = {}
            self._ignored_fields = []
            self._faults.clear()
            self.grace_seconds = self._initial_grace
            self.list_lag_s = 0.0
            self.unique_names = True

    def all_clusters(self) -> list[dict[str, Any]]:
        """Every cluster of every owner, for tests that check what exists."""
        with self._op(saves="touched") as now:
            return [self._render(c, now) | {"owner": c.owner[:12]} for c in self._sim.ordered()]

    def close(self) -> None:
        """Release what the platform runs besides itself (a Kubernetes twin's processes); call once, last."""

    def flush(self) -> None:
        """Persist the clock (and everything else) now, e.g. before shutting down."""
        with self._op():
            pass

    # --- internals ------------------------------------------------------------------------------

    def _duration(self, nominal_seconds: float) -> float:
        return self.clock.duration(nominal_seconds)

    def _cluster_added(self, record: ClusterRecord) -> None:
        """A hook for a platform with a Kubernetes twin; called under the lock when a cluster is created."""

    def _remediation_entered(self, transition: RemediationTransition) -> None:
        """A hook for a platform with a Kubernetes twin; called under the lock each time a remediation enters a
        state (by a request, or on the clock): ``RUNNING`` is when the node goes down as the mode implies,
        the finished states say how it ended (the node list already shows a successful repair's result)."""

    def _remediation(self, remediation_id: str) -> tuple[ClusterRecord, RemediationRecord]:
        """A remediation of any cluster, by id; 404 when there is none."""
        for record in self._sim.clusters.values():
            for rem in record.remediations:
                if rem.remediation_id == remediation_id:
                    return record, rem
        raise not_found(f"remediation {remediation_id} not found", "remediation_id")

    def _cluster_loaded(self, record: ClusterRecord) -> None:
        """A cluster read back from the state file. Without a twin nothing serves its Kubernetes: nothing to
        wait for before it shows Ready (a platform with a twin is told when its control plane serves again)."""
        record.kube_serving = True

    @contextmanager
    def _op(self, saves: Literal["all", "touched"] = "all") -> Iterator[float]:
        """One atomic operation at the clock's now, persisted when it ends.

        ``saves="touched"``: the operation changes no cluster but those it adds to ``self._touched`` (a read
        adds none), so only those are written again, unless timed actions on the clock changed others.
        """
        with self._lock:
            now = self.clock.now()
            # One look over the clusters: most requests find nothing due.
            due = self._sim.has_due_action(now)
            save_all = saves == "all" or due
            self._touched = set()
            if due:
                self._sim.advance_to(now)
            # Volumes of clusters gone since the last operation (here or on a twin's pass) go with them.
            self._volumes.settle(self._sim.clusters)
            try:
                yield now
            finally:
                self._persist(now, None if save_all else self._touched)

    def _check_pool_draw(self, record: ClusterRecord, req: ClusterUpdateRequest) -> None:
        """Refuse an update raising the cluster's draw on its capacity pool past what the pool has free."""
        pool_id = capacity_pools.pool_of(record)
        draw = capacity_pools.draw_after_update(record, req.num_gpus, req.num_capacity_pool_gpus)
        if pool_id is None or draw <= record.num_capacity_pool_gpus:
            return
        pool = capacity_pools.check_usable(self._capacity_pools, pool_id, record.region, record.gpu_type)
        capacity_pools.check_draw(pool, draw, self._sim.clusters.values(), excluding=record.cluster_id)

    def _render(self, record: ClusterRecord, now: float) -> dict[str, Any]:
        volumes = [storage.view(v) for v in self._volumes.of_cluster(record.cluster_id)]
        return render.cluster(record, now, self.extra_fields, volumes)

    def _owned(self, owner: str, cluster_id: str) -> ClusterRecord:
        record = self._sim.clusters.get(cluster_id)
        if record is None or record.owner != owner:
            raise not_found(f"cluster {cluster_id} not found", "cluster_id")
        return record

    def _persist(self, now: float, touched: set[str] | None) -> None:
        """Save the platform; of the clusters, only the ``touched`` ones unless that is ``None`` (all)."""
        if self._store is None:
            return
        saved = {
            "now": now,
            "speed": self.clock.speed,
            "grace_seconds": self.grace_seconds,
            "list_lag_s": self.list_lag_s,
            "unique_names": self.unique_names,
            "remediation_timings": self._sim.remediation_timings.model_dump(),
            "pools": self._sim.pools,
            "seq": self._sim.seq,
            "volumes": self._volumes.to_json(),
            "capacity_pools": capacity_pools.to_json(self._capacity_pools),
            **self._faults.to_json(),
        }
        if touched is None:
            clusters = {cid: c.model_dump_json() for cid, c in self._sim.clusters.items()}
        else:
            clusters = {
                cid: self._sim.clusters[cid].model_dump_json() for cid in touched if cid in self._sim.clusters
            }
        self._store.save(saved, clusters, complete=touched is None)

    def _load(self) -> dict[str, Any] | None:
        assert self._store is not None
        saved, clusters = self._store.load()
        for data in clusters:
            record = ClusterRecord.model_validate_json(data)
            self._cluster_loaded(record)
            self._sim.clusters[record.cluster_id] = record
        if saved is None:
            return None
        self._sim.pools = default_pools() | {k: int(v) for k, v in saved["pools"].items()}
        self._sim.seq = int(saved["seq"])
        self._volumes.load_json(saved.get("volumes", []))
        self._capacity_pools = capacity_pools.from_json(saved.get("capacity_pools", []))
        self._faults.load_json(saved)
        return saved


def _autoscaling_info(record: ClusterRecord) -> dict[str, Any]:
    """A cluster's autoscaling as the admin API shows it: settings, the demand last reported, added nodes."""
    return {
        "cluster_id": record.cluster_id,
        "auto_scale": record.auto_scale,
        "auto_scale_max_gpus": record.auto_scale_max_gpus,
        "num_gpus": record.num_gpus,
        "pending_gpus": record.pending_gpus,
        "busy_node_ids": record.busy_node_ids,
        "autoscaled_node_ids": [n.node_id for n in record.nodes if n.autoscaled],
        "scale_at": None if record.scale_at is None else to_datetime(record.scale_at).isoformat(),
    }


def _check_advance(now: float, advance_s: float) -> None:
    if not (math.isfinite(advance_s) and advance_s >= 0):
        raise invalid(f"advance_s must be a finite number >= 0; got {advance_s}", "advance_s")
    try:
        to_datetime(now + advance_s)
    except (OverflowError, OSError, ValueError) as exc:
        raise invalid(
            f"advance_s would move the clock past the year 9999; got {advance_s}", "advance_s"
        ) from exc
