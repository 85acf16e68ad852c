"""The node repairs (remediations) of a cluster as ``status`` shows them: one row per repair, on the Kubernetes
Node it repairs, with the workloads whose pods run there. Pure.

What goes in, all plain data from the cluster's snapshot (``together_clusters.cli.live``): the API's
remediations (``Remediation`` as JSON: those under way, and the newest that ended), the cluster's worker
nodes (``host_name``, ``instance_id``) and its Kubernetes view (``together_clusters.cli.kube_view``). A
remediation names its node by ``instance_name`` (the worker node's ``host_name``), else its ``instance_id``
is looked up among the worker nodes; either becomes the Node's name by
:func:`together_clusters.platform.kubernetes_node_name`, the one mapping every reader uses.

"Since" is when the repair entered its state as far as the API tells: ``start_time`` once it runs (or
quarantines), ``review_time`` once approved, else ``create_time``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from together_clusters.platform import kubernetes_node_name, remediation_mode_name
from together_clusters.provider.vocabulary import ACTIVE_REMEDIATION_STATES

from ..capacity import parse_time
from ..workloads import workloads_by_node

TRIGGER_PREFIX = "REMEDIATION_TRIGGER_"
_STARTED_STATES = frozenset({"QUARANTINING", "QUARANTINED", "RUNNING"})


@dataclass(frozen=True)
class NodeRepair:
    """One remediation of one node, as ``status`` shows it."""

    node: str
    """The Kubernetes Node's name (``-`` when the remediation names no node the cluster lists)."""
    remediation_id: str
    instance_id: str | None
    mode: str
    """Short: ``HOST_AWARE``, ``VM_ONLY``, ``EVICT_WITHOUT_REPLACEMENT``, ``REBOOT_VM``, ``HOST_POWER_CYCLE``."""
    state: str
    trigger: str
    """Short: ``AUTOMATED`` (the platform's health checks) or ``MANUAL``."""
    since: str | None
    """When it entered its state, as far as the API tells (ISO 8601, the platform's clock)."""
    ended_at: str | None = None
    workloads: list[str] = field(default_factory=list)
    """``namespace/name`` of the workloads with a pod on the node now (a repair under way only; empty
    without a Kubernetes view)."""


@dataclass(frozen=True)
class RepairsReport:
    """A cluster's repairs under way and those that ended in the window; ``unread`` says why the API's
    remediations could not be read."""

    active: list[NodeRepair] = field(default_factory=list)
    recently_ended: list[NodeRepair] = field(default_factory=list)
    unread: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def short(value: str | None, prefix: str) -> str:
    """An enum value without its prefix (``REMEDIATION_MODE_VM_ONLY`` -> ``VM_ONLY``); ``-`` when unset."""
    if not value:
        return "-"
    return value[len(prefix) :] if value.startswith(prefix) else value


def node_of(remediation: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> str | None:
    """The Kubernetes Node a remediation repairs: by its ``instance_name``, else by its instance's host."""
    host = remediation.get("instance_name")
    if not host:
        instance = remediation.get("instance_id")
        host = next(
            (n.get("host_name") for n in nodes if instance and n.get("instance_id") == instance), None
        )
    return kubernetes_node_name(str(host)) if host else None


def since(remediation: Mapping[str, Any]) -> str | None:
    """When the remediation entered its state, as far as the API tells (see the module docstring)."""
    state = remediation.get("state")
    if state in _STARTED_STATES and remediation.get("start_time"):
        return str(remediation["start_time"])
    if state == "PENDING" and remediation.get("review_time"):
        return str(remediation["review_time"])
    created = remediation.get("create_time")
    return str(created) if created else None


def repairs_report(
    remediations: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    view: Mapping[str, Any] | None,
    window_start: datetime,
) -> RepairsReport:
    """The repairs under way (oldest first), and those that ended at or after ``window_start`` (newest first)."""
    on_node = workloads_by_node(view) if view is not None and not view.get("error") else {}
    active, ended = [], []
    seen: set[str] = set()
    for remediation in remediations:
        rid = str(remediation.get("id") or "")
        if not rid or rid in seen:
            continue
        seen.add(rid)
        state = str(remediation.get("state") or "")
        under_way = state in ACTIVE_REMEDIATION_STATES
        node = node_of(remediation, nodes)
        row = NodeRepair(
            node=node or "-",
            remediation_id=rid,
            instance_id=remediation.get("instance_id"),
            mode=remediation_mode_name(remediation.get("mode")) if remediation.get("mode") else "-",
            state=state or "-",
            trigger=short(remediation.get("trigger"), TRIGGER_PREFIX),
            since=since(remediation),
            ended_at=remediation.get("end_time"),
            # Who runs on a node is news only while its repair is still to come or under way.
            workloads=list(on_node.get(node or "", [])) if under_way else [],
        )
        if under_way:
            active.append(row)
        elif row.ended_at and parse_time(row.ended_at) >= window_start:
            ended.append(row)
    active.sort(key=lambda r: (r.since or "", r.node))
    ended.sort(key=lambda r: r.ended_at or "", reverse=True)
    return RepairsReport(active, ended)


def latest_repair_time(snapshot: Mapping[str, Any]) -> datetime | None:
    """The newest moment a snapshot's repairs tell of (their remediations' times, their Node Events'): the
    platform's clock, which may run ahead of ours, as the emulator's does; the window reaches it."""
    stamps = [
        r.get(name)
        for r in snapshot.get("remediations") or []
        for name in ("create_time", "review_time", "start_time", "end_time")
    ]
    stamps += [
        e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
        for e in (snapshot.get("kubernetes") or {}).get("node_events") or []
    ]
    return max((parse_time(str(s)) for s in stamps if s), default=None)
