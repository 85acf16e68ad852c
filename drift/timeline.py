"""Reconstruct a cluster's allocated preemptible GPUs over time from its lifecycle events. Pure.

The API reports only the allocation *now* and the events that changed it, so the series is built
backwards: starting from today's value, undo each change, newest first. Which changes count:

- ``TogetherScaledUp`` of a preemptible node: +its GPUs at the event;
- ``TogetherScaledDown`` of a preemptible node: -its GPUs at the event;
- ``TogetherPreempted``: the node is cordoned at the event and keeps its GPUs through its grace period,
  so -its GPUs when it is actually deleted (``deleted_at``); a node still listed as live has not gone
  yet; a node the API no longer lists at all is taken as gone at the event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from together_clusters.platform import GPUS_PER_NODE, PREEMPTIBLE, ComputeClass, LifecycleReason

from .capacity import parse_time


@dataclass(frozen=True)
class Timeline:
    """A step series of allocated preemptible GPUs and the moments of preemption, within a window."""

    points: list[tuple[datetime, int]]
    preemptions: list[datetime]
    desired: int


def _node_class(node: Mapping[str, Any] | None, event: Mapping[str, Any]) -> str:
    if node is not None and node.get("compute_class"):
        return str(node["compute_class"])
    if event.get("reason") == LifecycleReason.PREEMPTED:
        return PREEMPTIBLE  # only preemptible nodes are ever preempted
    message = str(event.get("message", ""))
    # Without a per-node marking the event's own wording is all there is.
    return PREEMPTIBLE if PREEMPTIBLE in message.lower() else ComputeClass.STANDARD


def changes(snapshot: Mapping[str, Any]) -> list[tuple[datetime, int]]:
    """Every change to the allocated preemptible GPUs the events tell of, oldest first."""
    nodes = {str(n["node_id"]): n for n in snapshot.get("nodes") or []}
    found: list[tuple[datetime, int]] = []
    for event in snapshot.get("events") or []:
        node = nodes.get(str(event.get("node_id")))
        if _node_class(node, event) != PREEMPTIBLE:
            continue
        gpus = int((node or {}).get("num_gpus") or GPUS_PER_NODE)
        at = parse_time(event["timestamp"])
        reason = event.get("reason")
        if reason == LifecycleReason.SCALED_UP:
            found.append((at, gpus))
        elif reason == LifecycleReason.SCALED_DOWN:
            found.append((at, -gpus))
        elif reason == LifecycleReason.PREEMPTED:
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
        for e in snapshot.get("events") or []
        if e.get("reason") == LifecycleReason.PREEMPTED and start <= parse_time(e["timestamp"]) <= end
    )
    return Timeline(points, preemptions, int(snapshot.get("desired_preemptible_gpus") or 0))
