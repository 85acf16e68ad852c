"""Clusters, their nodes and the preemptible pools, moved along by timed actions.

Five kinds of action are due at a given emulated time: removing a preempted node once its grace period is
over, finishing a deletion, moving a node remediation to its next state (see
:mod:`together_clusters.emulator.remediations`), handing free preemptible capacity to a cluster short of
its target, and autoscaling a cluster created with ``auto_scale`` (see
:mod:`together_clusters.emulator.autoscaling`: standard nodes added for reported demand, idle ones removed).
:meth:`Simulation.advance_to` applies every due action in time order, so whether the clock is read often or
rarely, the outcome is the same. Nothing here locks, stores or speaks HTTP; the platform does that.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

from together_clusters.platform import NODE_NAME_PREFIXES, ComputeClass, LifecycleReason

from . import autoscaling, catalog, remediations
from .catalog import DEFAULT_PREEMPTIBLE_POOL_GPUS, GPUS_PER_NODE
from .clock import nominal
from .errors import conflict
from .lifecycle import (
    DATA_PLANE_START_S,
    DELETE_DURATION_S,
    NODE_BOOTING_AFTER_S,
    NODE_RUNNING_AFTER_S,
    PREEMPTIBLE_FILL_DELAY_S,
    Duration,
    deleting_phase,
    node_schedule,
    visible,
)
from .records import ClusterRecord, EventRecord, NodeRecord, RemediationRecord, Timed
from .remediations import RemediationTimings, RemediationTransition
from .shapes import RemediationState

ActionKind = Literal["remove", "delete", "remediate", "fill", "scale"]
# When actions fall due at the same moment: removals free nodes before deletions and fills look at them;
# a remediation moves on after its node's removal (and is cancelled by it), before a fill counts nodes;
# autoscaling (standard nodes only) comes last.
_ACTION_ORDER: dict[ActionKind, int] = {"remove": 0, "delete": 1, "remediate": 2, "fill": 3, "scale": 4}
Subject = NodeRecord | RemediationRecord | None
RemediationHook = Callable[[RemediationTransition], None]


def pool_key(region: str, gpu_type: str) -> str:
    """The key of the preemptible pool shared by clusters of one region and GPU type."""
    return f"{region}/{gpu_type}"


def default_pools() -> dict[str, int]:
    """Free preemptible GPUs of every pool after start or reset."""
    return {pool_key(r, g): DEFAULT_PREEMPTIBLE_POOL_GPUS for r, g in catalog.pool_keys()}


class Simulation:
    """Every cluster (of every owner) and the free GPUs of every preemptible pool."""

    def __init__(
        self,
        duration: Duration = nominal,
        on_remediation: RemediationHook | None = None,
        remediation_timings: RemediationTimings | None = None,
    ) -> None:
        # Nominal durations -> time on the platform's clock (shortened by its speed).
        self.duration = duration
        # Told of every state a remediation enters (the platform passes it on to a Kubernetes twin).
        self.on_remediation = on_remediation
        self.remediation_timings = remediation_timings or RemediationTimings()
        self.clusters: dict[str, ClusterRecord] = {}
        self.pools: dict[str, int] = default_pools()
        self.seq = 0
        # When the earliest timed action falls due (inf: none), None until looked up. Every method that
        # can set a timer forgets it, so a run of reads looks over the clusters once, not per request.
        # (A platform restoring ``clusters`` from its state file does so before the first look.)
        self._earliest_due: float | None = None

    def next_seq(self) -> int:
        """A number ordering a new cluster after every earlier one."""
        self.seq += 1
        return self.seq

    def ordered(self) -> list[ClusterRecord]:
        """Clusters in creation order."""
        return sorted(self.clusters.values(), key=lambda c: c.seq)

    # --- time -----------------------------------------------------------------------------------

    def advance_to(self, now: float) -> None:
        """Apply every timed action due by ``now``, earliest first."""
        self._earliest_due = None
        while (due := self._next_action(now)) is not None:
            at, kind, record, subject = due
            if kind == "remove" and isinstance(subject, NodeRecord):
                self._remove_preempted(record, subject, at)
            elif kind == "remediate" and isinstance(subject, RemediationRecord):
                self._step_remediation(record, subject, at)
            elif kind == "delete":
                self._finish_delete(record, at)
            elif kind == "scale":
                self._autoscale(record, at)
            else:
                self._fill(record, at)

    def has_due_action(self, now: float) -> bool:
        """Whether :meth:`advance_to` ``now`` would change anything."""
        if self._earliest_due is None:
            self._earliest_due = min((at for at, _, _, _ in self._actions()), default=math.inf)
        return self._earliest_due <= now

    def _actions(self) -> Iterator[tuple[float, ActionKind, ClusterRecord, Subject]]:
        """Every timed action pending, in no order."""
        for record in self.clusters.values():
            for n in record.nodes:
                if n.remove_at is not None:
                    yield n.remove_at, "remove", record, n
            for r in record.remediations:
                if r.next_at is not None:
                    yield r.next_at, "remediate", record, r
            if record.delete_done_at is not None:
                yield record.delete_done_at, "delete", record, None
            if record.fill_at is not None:
                yield record.fill_at, "fill", record, None
            if record.scale_at is not None:
                yield record.scale_at, "scale", record, None

    def _next_action(self, now: float) -> tuple[float, ActionKind, ClusterRecord, Subject] | None:
        best: tuple[tuple[float, int, int, int], ActionKind, ClusterRecord, Subject] | None = None
        for at, kind, record, subject in self._actions():
            rank = (
                at,
                _ACTION_ORDER[kind],
                record.seq,
                subject.seq if isinstance(subject, RemediationRecord) else 0,
            )
            if at <= now and (best is None or rank < best[0]):
                best = (rank, kind, record, subject)
        return None if best is None else (best[0][0], best[1], best[2], best[3])

    def _remove_preempted(self, record: ClusterRecord, node: NodeRecord, at: float) -> None:
        # The reclaimed GPUs went to whoever preempted them, so the pool does not get them back.
        record.nodes.remove(node)
        node.remove_at = None
        node.deleted_at = at
        record.deleted_nodes.append(node)
        self._instance_gone(record, node, at, "was preempted")
        self._want_fill(record, at)

    def _finish_delete(self, record: ClusterRecord, at: float) -> None:
        returned = GPUS_PER_NODE * len(
            [n for n in record.live(ComputeClass.PREEMPTIBLE) if n.cordoned_at is None]
        )
        del self.clusters[record.cluster_id]
        if returned:
            self._release(pool_key(record.region, record.gpu_type), returned, at)

    def _fill(self, record: ClusterRecord, at: float) -> None:
        record.fill_at = None
        key = pool_key(record.region, record.gpu_type)
        missing = (record.desired_preemptible_gpus - record.allocated_preemptible_gpus) // GPUS_PER_NODE
        granted = max(0, min(missing, self.pools.get(key, 0) // GPUS_PER_NODE))
        for _ in range(granted):
            self.pools[key] -= GPUS_PER_NODE
            self._add_node(record, ComputeClass.PREEMPTIBLE, at, event=True)

    def _want_fill(self, record: ClusterRecord, at: float) -> None:
        """Have the fulfillment worker look at the cluster soon, if it is short and its pool is not empty."""
        short = record.desired_preemptible_gpus > record.allocated_preemptible_gpus
        has_free = self.pools.get(pool_key(record.region, record.gpu_type), 0) >= GPUS_PER_NODE
        if record.deleting or not short or not has_free:
            return
        due = at + self.duration(PREEMPTIBLE_FILL_DELAY_S)
        record.fill_at = due if record.fill_at is None else min(record.fill_at, due)

    def _release(self, key: str, gpus: int, at: float) -> None:
        """Return GPUs to a pool; clusters of that pool short of their target get a look."""
        self.pools[key] = self.pools.get(key, 0) + gpus
        self._want_fill_pool(key, at)

    def _want_fill_pool(self, key: str, at: float) -> None:
        for record in self.ordered():
            if pool_key(record.region, record.gpu_type) == key:
                self._want_fill(record, at)

    # --- clusters -------------------------------------------------------------------------------

    def add_cluster(self, record: ClusterRecord, now: float) -> None:
        """A new cluster: its standard nodes appear with the data plane, preemptible ones when granted."""
        self._earliest_due = None
        for _ in range(record.num_gpus // GPUS_PER_NODE):
            self._add_node(
                record,
                ComputeClass.STANDARD,
                record.created_at + self.duration(DATA_PLANE_START_S),
                event=False,
            )
        self.clusters[record.cluster_id] = record
        self._want_fill(record, now)

    def start_delete(self, record: ClusterRecord, now: float) -> None:
        """Begin deleting: provisioning stops where it is, and the cluster is gone after a while."""
        if record.deleting:
            return
        self._earliest_due = None
        record.schedule = visible(record.schedule, now) + [deleting_phase(now)]
        for node in [n for n in record.nodes if n.appears_at > now]:
            record.nodes.remove(node)
        for node in record.nodes:
            node.schedule = visible(node.schedule, now)
        if record.control_plane is not None:
            record.control_plane.schedule = visible(record.control_plane.schedule, now)
            if not record.control_plane.schedule:
                record.control_plane = None
        # Events still ahead belong to nodes that will now never appear.
        record.events = [e for e in record.events if e.at <= now]
        record.deleting_since = now
        record.delete_done_at = now + self.duration(DELETE_DURATION_S)
        record.fill_at = None
        record.scale_at = None

    def scale_standard(self, record: ClusterRecord, num_gpus: int, now: float) -> None:
        """Add or remove standard nodes (newest first) to match ``num_gpus``.

        On an autoscaling cluster ``num_gpus`` is the floor: a higher floor takes in the nodes autoscaling
        added (oldest first) before adding any, a lower one hands its surplus nodes to autoscaling, which
        removes them once idle.
        """
        self._earliest_due = None
        target = num_gpus // GPUS_PER_NODE
        current = [n for n in record.live(ComputeClass.STANDARD) if not n.autoscaled]
        if record.auto_scale:
            added = [n for n in record.live(ComputeClass.STANDARD) if n.autoscaled]
            for node in added[: max(0, target - len(current))]:
                node.autoscaled, node.idle_since = False, None
                current.append(node)
            for node in current[target:]:
                node.autoscaled = True
                if node.node_id not in record.busy_node_ids:
                    node.idle_since = _idle_from(node, now)
            current = current[:target]
        for node in reversed(current[target:]):
            self._drop_node(record, node, now)
        appears_at = max(now, record.created_at + self.duration(DATA_PLANE_START_S))
        for _ in range(target - len(current)):
            self._add_node(record, ComputeClass.STANDARD, appears_at, event=True)
        record.num_gpus = num_gpus
        self._want_scale(record, now)

    # --- autoscaling (see emulator/autoscaling.py) ----------------------------------------------

    def report_demand(
        self, record: ClusterRecord, pending_gpus: int, busy_node_ids: Iterable[str], now: float
    ) -> None:
        """The cluster's demand as of ``now``: GPUs of pods waiting for lack of GPUs, and the nodes running a
        pod. An autoscaling cluster adds standard nodes for it after a delay, and removes idle added ones."""
        busy = sorted(set(busy_node_ids))
        record.pending_gpus, record.busy_node_ids = max(0, pending_gpus), busy
        for node in record.live(ComputeClass.STANDARD):
            if not node.autoscaled:
                continue
            if node.node_id in busy:
                node.idle_since = None
            elif node.idle_since is None:
                node.idle_since = _idle_from(node, now)
        self._want_scale(record, now)

    def _standard_nodes(self, record: ClusterRecord) -> list[autoscaling.StandardNode]:
        busy = set(record.busy_node_ids)
        return [
            autoscaling.StandardNode(n.node_id, n.autoscaled, n.node_id in busy, n.idle_since)
            for n in record.live(ComputeClass.STANDARD)
        ]

    def _want_scale(self, record: ClusterRecord, now: float) -> None:
        """Have autoscaling look at the cluster when it has something to do: add nodes for pending demand
        (after the delay; an earlier look already due stays), or remove the first added node gone idle."""
        if not record.auto_scale or record.deleting:
            return
        self._earliest_due = None
        nodes = self._standard_nodes(record)
        ceiling = autoscaling.ceiling_gpus(record.num_gpus, record.auto_scale_max_gpus)
        due: list[float] = []
        if autoscaling.nodes_to_add(record.num_gpus, ceiling, nodes, record.pending_gpus):
            due.append(now + self.duration(autoscaling.SCALE_UP_DELAY_S))
        idle_check = autoscaling.next_idle_check(nodes, autoscaling.idle_window(self.duration))
        if idle_check is not None:
            due.append(max(now, idle_check))
        if not due:
            record.scale_at = None
            return
        record.scale_at = min(due) if record.scale_at is None else min(record.scale_at, *due)

    def _autoscale(self, record: ClusterRecord, at: float) -> None:
        """Autoscaling's look: remove the added nodes idle long enough, add nodes for pending demand."""
        record.scale_at = None
        if not record.auto_scale or record.deleting:
            return
        window = autoscaling.idle_window(self.duration)
        by_id = {n.node_id: n for n in record.live(ComputeClass.STANDARD)}
        for node_id in autoscaling.nodes_to_remove(record.num_gpus, self._standard_nodes(record), at, window):
            self._drop_node(record, by_id[node_id], at)
            _tag_event(record, node_id, "by autoscaling: idle")
        ceiling = autoscaling.ceiling_gpus(record.num_gpus, record.auto_scale_max_gpus)
        adding = autoscaling.nodes_to_add(
            record.num_gpus, ceiling, self._standard_nodes(record), record.pending_gpus
        )
        appears_at = max(at, record.created_at + self.duration(DATA_PLANE_START_S))
        for _ in range(adding):
            node = self._add_node(record, ComputeClass.STANDARD, appears_at, event=True)
            node.autoscaled, node.idle_since = True, _idle_from(node, appears_at)
            _tag_event(record, node.node_id, f"by autoscaling: {record.pending_gpus} GPUs pending")
        self._want_scale(record, at)

    def set_desired_preemptible(self, record: ClusterRecord, desired: int, now: float) -> None:
        """Change the target; surplus healthy nodes go back to the pool now, a shortfall is filled later."""
        self._earliest_due = None
        record.desired_preemptible_gpus = desired
        released = 0
        # Cordoned nodes are already on their way out; release healthy ones, newest first.
        for node in reversed([n for n in record.live(ComputeClass.PREEMPTIBLE) if n.cordoned_at is None]):
            if record.allocated_preemptible_gpus <= desired:
                break
            self._drop_node(record, node, now)
            released += GPUS_PER_NODE
        if released:
            self._release(pool_key(record.region, record.gpu_type), released, now)
        self._want_fill(record, now)

    def preempt(
        self,
        record: ClusterRecord,
        count: int,
        grace_seconds: float,
        now: float,
        node_ids: list[str] | None = None,
    ) -> list[NodeRecord]:
        """Cordon ``count`` healthy preemptible nodes now (the oldest, or exactly ``node_ids``); each is
        removed ``grace_seconds`` (nominal) later."""
        candidates = [
            n for n in record.live(ComputeClass.PREEMPTIBLE) if n.cordoned_at is None and n.appears_at <= now
        ]
        if node_ids is not None:
            by_id = {n.node_id: n for n in candidates}
            for node_id in node_ids:
                if node_id not in by_id:
                    why = (
                        "is already preempted"
                        if any(n.node_id == node_id and n.cordoned_at is not None for n in record.nodes)
                        else "is not a preemptible node of the cluster that can be preempted"
                    )
                    choices = ", ".join(by_id) or "none"
                    raise conflict(f"node_ids: {node_id} {why}; choose from: {choices}", "node_ids")
            candidates = [by_id[node_id] for node_id in dict.fromkeys(node_ids)]
            count = len(candidates)
        if len(candidates) < count:
            raise conflict(
                f"count must not exceed the cluster's {len(candidates)} preemptible node(s) that can be "
                f"preempted; got {count}",
                "count",
            )
        self._earliest_due = None
        for node in candidates[:count]:
            node.cordoned_at = now
            node.remove_at = now + self.duration(grace_seconds)
            message = (
                f"Node {node.node_id} is being preempted: cordoned, pods have "
                f"{grace_seconds:g}s to terminate before the node is deleted"
            )
            record.events.append(
                EventRecord(node_id=node.node_id, reason=LifecycleReason.PREEMPTED, message=message, at=now)
            )
        return candidates[:count]

    def reclaim_now(self, record: ClusterRecord, node_id: str, now: float) -> bool:
        """Remove a preempted node at ``now`` instead of at the end of its grace period (its pods have exited);
        ``False`` when it is not a node being preempted."""
        node = next((n for n in record.nodes if n.node_id == node_id and n.remove_at is not None), None)
        if node is None:
            return False
        if node.remove_at is not None and node.remove_at > now:
            node.remove_at = now
            self._earliest_due = None
        return True

    def _add_node(
        self,
        record: ClusterRecord,
        compute_class: ComputeClass,
        appears_at: float,
        event: bool,
        schedule: list[Timed] | None = None,
    ) -> NodeRecord:
        record.node_seq += 1
        node = NodeRecord(
            # Named as documented, the class in the name; the cluster's sequence number keeps names unique across
            # clusters and the same from run to run.
            node_id=f"{NODE_NAME_PREFIXES[compute_class]}-{record.seq}-{record.node_seq}",
            instance_id=f"i-{secrets.token_hex(8)}",
            compute_class=compute_class,
            # A cluster stuck waiting for its data plane never gets a node of any class running.
            schedule=schedule
            or node_schedule(appears_at, boots=record.outcome != "stuck", duration=self.duration),
        )
        record.nodes.append(node)
        if event:
            message = f"Added {compute_class} node {node.node_id} ({GPUS_PER_NODE} GPUs)"
            record.events.append(
                EventRecord(
                    node_id=node.node_id, reason=LifecycleReason.SCALED_UP, message=message, at=appears_at
                )
            )
        return node

    def _drop_node(self, record: ClusterRecord, node: NodeRecord, at: float) -> None:
        """Scale a node down: gone at once, recorded as TogetherScaledDown unless it never appeared."""
        record.nodes.remove(node)
        if node.appears_at > at:
            # Never seen: its pending TogetherScaledUp must not show up later either.
            record.events = [e for e in record.events if e.node_id != node.node_id]
            return
        node.deleted_at = at
        record.deleted_nodes.append(node)
        self._instance_gone(record, node, at, "was scaled down")
        message = f"Removed {node.compute_class} node {node.node_id} ({GPUS_PER_NODE} GPUs)"
        record.events.append(
            EventRecord(node_id=node.node_id, reason=LifecycleReason.SCALED_DOWN, message=message, at=at)
        )

    # --- remediations ---------------------------------------------------------------------------

    def enter_remediation(
        self, record: ClusterRecord, rem: RemediationRecord, state: RemediationState, at: float
    ) -> None:
        """``rem`` enters ``state`` at ``at`` (its timer set for the next step); the hook hears of it."""
        self._earliest_due = None
        remediations.enter(rem, state, at, self.remediation_timings, self.duration)
        if self.on_remediation is not None:
            self.on_remediation(remediations.transition_of(rem))

    def _step_remediation(self, record: ClusterRecord, rem: RemediationRecord, at: float) -> None:
        """``rem``'s time in its state is up: on to the next (a success changes the node list first)."""
        state = remediations.next_state(rem)
        node = next((n for n in record.nodes if n.node_id == rem.node_id), None)
        if state is None:
            rem.next_at = None
            return
        if node is None:
            rem.error_message = f"instance {rem.instance_id} left the cluster before the remediation finished"
            self.enter_remediation(record, rem, "CANCELLED", at)
            return
        if state == "SUCCEEDED":
            self._remediated(record, rem, node, at)
        elif state == "FAILED":
            rem.error_message = rem.failure or remediations.failure_message(rem)
        self.enter_remediation(record, rem, state, at)

    def _remediated(self, record: ClusterRecord, rem: RemediationRecord, node: NodeRecord, at: float) -> None:
        """The node list after a successful repair: a new instance in the old one's place (VM_ONLY,
        HOST_AWARE), the instance gone (EVICT_WITHOUT_REPLACEMENT), or kept (REBOOT_VM, HOST_POWER_CYCLE)."""
        if rem.mode not in remediations.REMOVING_MODES:
            return
        record.nodes.remove(node)
        node.deleted_at = at
        record.deleted_nodes.append(node)
        if rem.mode in remediations.REPLACING_MODES:
            # The new VM was provisioned while the repair ran: it is up when the repair succeeds.
            running_since = rem.start_time if rem.start_time is not None else at
            boots_at = max(running_since, at - self.duration(NODE_RUNNING_AFTER_S - NODE_BOOTING_AFTER_S))
            schedule = [
                Timed(phase="NODE_PHASE_PENDING", at=running_since),
                Timed(phase="NODE_PHASE_BOOTING", at=boots_at),
                Timed(phase="NODE_PHASE_RUNNING", at=at),
            ]
            new = self._add_node(record, node.compute_class, schedule[0].at, event=False, schedule=schedule)
            new.auto_remediation_enabled = node.auto_remediation_enabled
            rem.replacement_instance_id, rem.replacement_node_id = new.instance_id, new.node_id
        else:
            remediations.evicted_counts(record, node)

    def _instance_gone(self, record: ClusterRecord, node: NodeRecord, at: float, why: str) -> None:
        """A node left the cluster: the platform cancels its active remediation, saying why."""
        for rem in record.remediations:
            if rem.node_id == node.node_id and rem.state in remediations.ACTIVE_STATES:
                rem.error_message = f"instance {rem.instance_id} {why} before the remediation finished"
                self.enter_remediation(record, rem, "CANCELLED", at)

    # --- pools ----------------------------------------------------------------------------------

    def set_pool(self, key: str, free_gpus: int, now: float) -> None:
        """Set a pool's free GPUs; clusters of that pool short of their target get a look."""
        self._earliest_due = None
        self.pools[key] = free_gpus
        self._want_fill_pool(key, now)

    def pool_info(self, key: str) -> dict[str, Any]:
        """A pool's free GPUs, and what its clusters hold and want."""
        region, gpu_type = key.split("/", 1)
        members = [c for c in self.clusters.values() if pool_key(c.region, c.gpu_type) == key]
        return {
            "region": region,
            "gpu_type": gpu_type,
            "preemptible_gpus": self.pools[key],
            "allocated_preemptible_gpus": sum(c.allocated_preemptible_gpus for c in members),
            "desired_preemptible_gpus": sum(c.desired_preemptible_gpus for c in members if not c.deleting),
        }


def _idle_from(node: NodeRecord, now: float) -> float | None:
    """Since when a node running no pod counts as idle: from ``now``, or from when it is Running if that is
    later (None: it never boots)."""
    running = next((t.at for t in node.schedule if t.phase == "NODE_PHASE_RUNNING"), None)
    return None if running is None else max(now, running)


def _tag_event(record: ClusterRecord, node_id: str, why: str) -> None:
    """Say why in the node's latest scale event (autoscaling's, not a change of the program's count)."""
    event = next((e for e in reversed(record.events) if e.node_id == node_id), None)
    if event is not None:
        event.message += f" {why}"
