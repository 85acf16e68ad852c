"""Reconstruct a cluster's allocated preemptible GPUs over time from its lifecycle events. Pure.

The API reports only the allocation *now* and the events that changed it, so the series is built
backwards: starting from today's value, undo each change, newest first. Which changes count (each once per
node, whichever of its names an event uses):

- ``TogetherScaledUp`` or ``TogetherNodeAdded`` of a preemptible node: +its GPUs at the event;
- ``TogetherScaledDown`` of a preemptible node: -its GPUs at the event;
- a preemption (``TogetherPreempted`` or ``TogetherPreemptionNotified``): the node is cordoned at the event
  and keeps its GPUs through its grace period, so -its GPUs when it is actually deleted (``deleted_at``); a
  node still listed as live has not gone yet; a node the API no longer lists at all is taken as gone at the
  event.

Repairs (node remediations) are marked beside the preemptions: the moments of the Events the platform records
on the cluster's Kubernetes Nodes for each repair step (reasons starting ``TogetherRemediation``, read into
the snapshot's ``kubernetes`` view as ``node_events``). A repair does not enter the allocation series: the
API's lifecycle events, which the series is built from, do not tell of it.

A node's class is its own marking, else what its name encodes (``gpu-preemptible-dp...``), else preemptible
when it was preempted, else the event's wording.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from together_clusters.platform import (
    GPUS_PER_NODE,
    PREEMPTIBLE,
    REMEDIATION_REASON_PREFIX,
    ComputeClass,
    LifecycleReason,
    compute_class_of_node,
    is_preemption,
)

from ..capacity import parse_time


@dataclass(frozen=True)
class Timeline:
    """A step series of allocated preemptible GPUs and the moments of preemption and of node repairs, within
    a window."""

    points: list[tuple[datetime, int]]
    preemptions: list[datetime]
    desired: int
    repairs: list[datetime] = field(default_factory=list)
    """The moments of the repairs' steps (each Node Event of a remediation)."""
    arrivals: list[datetime] = field(default_factory=list)
    """The moments fleet workloads that had moved (failed over from another worker) started running here."""


def _node_class(node: Mapping[str, Any] | None, event: Mapping[str, Any]) -> str:
    if node is not None and node.get("compute_class"):
        return str(node["compute_class"])
    by_name = compute_class_of_node(str(event.get("node_id") or ""))
    if by_name is not None:
        return by_name
    if is_preemption(event.get("reason")):
        return PREEMPTIBLE  # only preemptible nodes are ever preempted
    message = str(event.get("message", ""))
    # Without a per-node marking the event's own wording is all there is.
    return PREEMPTIBLE if PREEMPTIBLE in message.lower() else ComputeClass.STANDARD


_KINDS: dict[str, str] = {
    LifecycleReason.SCALED_UP: "added",
    LifecycleReason.NODE_ADDED: "added",
    LifecycleReason.SCALED_DOWN: "scaled-down",
    LifecycleReason.PREEMPTED: "preempted",
    LifecycleReason.PREEMPTION_NOTIFIED: "preempted",
}
"""What an event's reason did to its node: the names of one change share a kind."""


def _once_per_node(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The events oldest first, keeping a node's first of each kind (one change under two names counts once;
    events of unknown reasons or without a node are kept as they are)."""
    kept: list[Mapping[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for event in sorted(events, key=lambda e: parse_time(e["timestamp"])):
        kind, node_id = _KINDS.get(str(event.get("reason"))), event.get("node_id")
        if kind is not None and node_id:
            if (str(node_id), kind) in seen:
                continue
            seen.add((str(node_id), kind))
        kept.append(event)
    return kept


def changes(snapshot: Mapping[str, Any]) -> list[tuple[datetime, int]]:
    """Every change to the allocated preemptible GPUs the events tell of, oldest first."""
    nodes = {str(n["node_id"]): n for n in snapshot.get("nodes") or []}
    found: list[tuple[datetime, int]] = []
    for event in _once_per_node(snapshot.get("events") or []):
        node = nodes.get(str(event.get("node_id")))
        if _node_class(node, event) != PREEMPTIBLE:
            continue
        gpus = int((node or {}).get("num_gpus") or GPUS_PER_NODE)
        at = parse_time(event["timestamp"])
        kind = _KINDS.get(str(event.get("reason")))
        if kind == "added":
            found.append((at, gpus))
        elif kind == "scaled-down":
            found.append((at, -gpus))
        elif kind == "preempted":
            if node is None:
                found.append((at, -gpus))
            elif node.get("deleted_at"):
                found.append((parse_time(node["deleted_at"]), -gpus))
    return sorted(found, key=lambda c: c[0])


def allocation_timeline(snapshot: Mapping[str, Any], start: datetime, end: datetime) -> Timeline:
    """The allocated preemptible GPUs from ``start`` to ``end`` as (time, value) steps."""
    now_value = int(snapshot.get("allocated_preemptible_gpus") or 0)
    steps = [c for c in changes(snapshot) if c[0] <= end]
    value = now_value - sum(delta for at, delta in steps if at > start)
    points = [(start, max(value, 0))]
    for at, delta in steps:
        if at <= start:
            continue
        value += delta
        points.append((at, max(value, 0)))
    points.append((end, now_value))
    preemptions = sorted(
        parse_time(e["timestamp"])
        for e in _once_per_node(snapshot.get("events") or [])
        if is_preemption(e.get("reason")) and start <= parse_time(e["timestamp"]) <= end
    )
    desired = int(snapshot.get("desired_preemptible_gpus") or 0)
    return Timeline(points, preemptions, desired, repair_moments(snapshot.get("kubernetes"), start, end))


def repair_moments(view: Mapping[str, Any] | None, start: datetime, end: datetime) -> list[datetime]:
    """The moments of the repairs' Node Events in the cluster's Kubernetes view, within the window, oldest
    first (an Event counted once, however often it was listed)."""
    seen: set[tuple[str, str, datetime]] = set()
    for event in (view or {}).get("node_events") or []:
        reason = str(event.get("reason") or "")
        stamp = event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
        if not reason.startswith(REMEDIATION_REASON_PREFIX) or not stamp:
            continue
        node = str((event.get("involvedObject") or {}).get("name") or "")
        at = parse_time(stamp)
        if start <= at <= end:
            seen.add((node, reason, at))
    return sorted(at for _, _, at in seen)
