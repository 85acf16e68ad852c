"""The stack's workloads as their cluster's Kubernetes API shows them: which are stalled for capacity, and
the GPU-hours each ran on standard and on preemptible nodes, with what falling back cost and what moving
back saved. Pure.

Works on a *view*: a plain dict made by ``together_clusters.cli.kube_view`` from a cluster's Kubernetes API,
objects as the API's JSON (camelCase)::

    {"pods": [...], "nodes": [...], "kueue_workloads": [...]}   # or {"error": "why it could not be read"}

A workload is the pods of one component: those with its name label and the placement label, grouped by namespace and name (a
TrainingRun's coordinator and workers are one workload). Stalled for capacity: a pod Pending that the
scheduler could not place (``PodScheduled`` False, reason ``Unschedulable``; its message says what it
waits for: GPUs, a node of the preemptible class), or a Kueue Workload whose quota is not reserved
(``QuotaReserved`` False: suspended until admitted). GPU-hours count the pods the cluster still knows: a
deleted pod's hours are gone with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from together_clusters.components.manifests.common import selector_for
from together_clusters.platform import (
    COMPUTE_CLASS_LABEL,
    FINISHED_POD_PHASES,
    PLACEMENT_LABEL,
    ComputeClass,
    compute_class_of_node,
    pod_gpu_request,
)
from together_clusters.platform.objects import condition, condition_true, condition_with

from .capacity import PREEMPTIBLE_DISCOUNT, parse_time

# The keys of the labels every component puts on its pods (their home is the manifests' selector): the
# component's name, then the part of it a pod runs (worker, coordinator, trial...).
NAME_LABEL, PART_LABEL = selector_for("", "")

UNSCHEDULABLE = "Unschedulable"
"""The reason of ``PodScheduled`` False when the scheduler found no node (not a scheduling gate)."""

QUOTA_RESERVED = "QuotaReserved"
"""The condition of a Kueue Workload that is False while it waits for quota (suspended until admitted)."""

SCHEDULER = "scheduler"
"""A :class:`Stall`'s source: pods Pending that the scheduler could not place."""
KUEUE = "kueue"
"""A :class:`Stall`'s source: Kueue Workloads not admitted."""

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Stall:
    """One workload waiting for capacity: since when (the oldest wait), on what, as who says it."""

    workload: str
    """``namespace/name``."""
    waiting: int
    """Pods Pending unschedulable, or pods of the Kueue Workloads not admitted."""
    since: str
    """The ``lastTransitionTime`` of the oldest wait (the cluster's clock, ISO 8601)."""
    waiting_for: str
    """The scheduler's (or Kueue's) message of the oldest wait."""
    source: str
    """:data:`SCHEDULER` (pods Pending) or :data:`KUEUE` (a Workload not admitted)."""
    cluster: str = ""
    """The stack's Cluster resource it runs on."""


@dataclass(frozen=True)
class WorkloadHours:
    """GPU-hours one workload's pods ran, by the class of their nodes, and what that cost or saved."""

    workload: str
    placement: str | None
    """The :class:`ComputeClass` its pods asked for (their placement label), ``None`` if they carry none."""
    standard_gpu_hours: float
    preemptible_gpu_hours: float
    fallback_cost: float | None = None
    """``PREEMPTIBLE_FIRST`` hours on standard x price x discount: what falling back cost over preemptible."""
    moving_back_saved: float | None = None
    """``PREEMPTIBLE_FIRST`` hours on preemptible x price x discount: what running there saved over standard."""


@dataclass(frozen=True)
class WorkloadsReport:
    """A cluster's workloads: stalled ones and GPU-hours; ``unread`` says why they could not be read."""

    stalled: list[Stall] = field(default_factory=list)
    hours: list[WorkloadHours] = field(default_factory=list)
    unread: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def workload_of(metadata: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> str | None:
    """``namespace/name`` of the component an object belongs to (its own labels, or ``labels``); ``None``
    for anything else (a controller's pod has a name label too, not the placement label)."""
    found = labels if labels is not None else metadata.get("labels") or {}
    name = found.get(NAME_LABEL)
    if not name or PLACEMENT_LABEL not in found:
        return None
    return f"{metadata.get('namespace') or 'default'}/{name}"


def workloads_by_node(view: Mapping[str, Any]) -> dict[str, list[str]]:
    """The workloads with a pod on each Node (by the Node's name), sorted: pods not finished (a pod
    Succeeded or Failed holds nothing on its node any more) and scheduled somewhere."""
    found: dict[str, set[str]] = {}
    for pod in view.get("pods") or []:
        workload = workload_of(pod.get("metadata") or {})
        node = (pod.get("spec") or {}).get("nodeName")
        if workload is None or not node or (pod.get("status") or {}).get("phase") in FINISHED_POD_PHASES:
            continue
        found.setdefault(str(node), set()).add(workload)
    return {node: sorted(names) for node, names in found.items()}


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def pod_stall(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(since, message)`` of a pod Pending because the scheduler found no node for it, else ``None``."""
    being_deleted = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if (pod.get("status") or {}).get("phase") != "Pending" or being_deleted:
        return None
    scheduled = condition_with(pod, "PodScheduled", "False", UNSCHEDULABLE)
    if scheduled is None:
        return None
    return str(scheduled.get("lastTransitionTime") or ""), _one_line(scheduled.get("message"))


def kueue_stall(workload: Mapping[str, Any]) -> tuple[str, int, str, str] | None:
    """``(component, pods, since, message)`` of a Kueue Workload waiting for quota, else ``None``.

    Its component is read from its pod sets' template labels (the pods it would create). A Workload that
    finished or that someone deactivated (``spec.active: false``) is not waiting for capacity."""
    spec = workload.get("spec") or {}
    if spec.get("active") is False or condition_true(workload, "Finished"):
        return None
    reserved = condition(workload, QUOTA_RESERVED)
    if reserved is None or reserved.get("status") != "False":
        return None
    pod_sets = spec.get("podSets") or []
    component = next(
        (
            w
            for s in pod_sets
            for w in [workload_of(workload.get("metadata") or {}, _template_labels(s))]
            if w is not None
        ),
        None,
    )
    if component is None:
        return None
    pods = sum(int(s.get("count") or 0) for s in pod_sets)
    return component, pods, str(reserved.get("lastTransitionTime") or ""), _one_line(reserved.get("message"))


def _template_labels(pod_set: Mapping[str, Any]) -> Mapping[str, str]:
    return ((pod_set.get("template") or {}).get("metadata") or {}).get("labels") or {}


def stalled_workloads(view: Mapping[str, Any], cluster: str = "") -> list[Stall]:
    """Every workload waiting for capacity, oldest wait first (one entry per workload and source)."""
    waits: dict[tuple[str, str], list[tuple[str, int, str]]] = {}
    for pod in view.get("pods") or []:
        stall = pod_stall(pod)
        workload = workload_of(pod.get("metadata") or {})
        if stall is not None and workload is not None:
            waits.setdefault((workload, SCHEDULER), []).append((stall[0], 1, stall[1]))
    for kueue_workload in view.get("kueue_workloads") or []:
        queued = kueue_stall(kueue_workload)
        if queued is not None:
            component, pods, since, message = queued
            waits.setdefault((component, KUEUE), []).append((since, pods, message))
    stalls = []
    for (workload, source), found in waits.items():
        oldest, _, said = min(found, key=lambda w: w[0])
        stalls.append(Stall(workload, sum(w[1] for w in found), oldest, said, source, cluster))
    return sorted(stalls, key=lambda s: (s.since, s.workload))


def describe_stall(stall: Stall) -> str:
    """One line for people: which workload, since when, what it waits for."""
    what, state = ("pod", "Pending") if stall.source == SCHEDULER else ("queued pod", "not admitted by Kueue")
    count = f"{stall.waiting} {what}{'s' if stall.waiting != 1 else ''}"
    at = f" on {stall.cluster}" if stall.cluster else ""
    return f"stalled for capacity: {stall.workload}{at}: {count} {state} since {stall.since}: {stall.waiting_for}"


# --- GPU-hours -----------------------------------------------------------------------------------


def node_class(node_name: str, nodes: Mapping[str, Mapping[str, Any]]) -> ComputeClass | None:
    """The class of the node a pod ran on: its compute-class label, else the class its name encodes; a node
    still there without either is standard (standard nodes may lack the label); ``None``: unknown."""
    node = nodes.get(node_name)
    label = (((node or {}).get("metadata") or {}).get("labels") or {}).get(COMPUTE_CLASS_LABEL)
    if label in (ComputeClass.STANDARD, ComputeClass.PREEMPTIBLE):
        return ComputeClass(label)
    by_name = compute_class_of_node(node_name)
    if by_name is not None:
        return by_name
    return ComputeClass.STANDARD if node is not None else None


def run_seconds(pod: Mapping[str, Any], now: datetime) -> float:
    """How long the pod's containers ran (the union of their runs, restarts' last run included; a running
    container up to ``now``)."""
    spans: list[tuple[datetime, datetime]] = []
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for state in (status.get("state") or {}, status.get("lastState") or {}):
            running, terminated = state.get("running") or {}, state.get("terminated") or {}
            if running.get("startedAt"):
                spans.append((parse_time(running["startedAt"]), now))
            if terminated.get("startedAt") and terminated.get("finishedAt"):
                spans.append((parse_time(terminated["startedAt"]), parse_time(terminated["finishedAt"])))
    return _union_seconds(spans)


def _union_seconds(spans: Iterable[tuple[datetime, datetime]]) -> float:
    total, reach = 0.0, None
    for start, end in sorted(spans):
        if reach is not None and start < reach:
            start = reach
        if end > start:
            total += (end - start).total_seconds()
            reach = end
    return total


@dataclass
class _Tally:
    """GPU-hours of one workload so far, by node class; those of ``PREEMPTIBLE_FIRST`` pods apart."""

    placement: str | None
    hours: dict[ComputeClass, float] = field(default_factory=dict)
    first_hours: dict[ComputeClass, float] = field(default_factory=dict)


def gpu_hours(
    view: Mapping[str, Any], now: datetime, price_per_gpu_hour: float | None
) -> list[WorkloadHours]:
    """GPU-hours per workload by node class, at ``price_per_gpu_hour`` (``None``: no money figures)."""
    nodes = {str((n.get("metadata") or {}).get("name")): n for n in view.get("nodes") or []}
    tallies: dict[str, _Tally] = {}
    for pod in view.get("pods") or []:
        metadata = pod.get("metadata") or {}
        workload = workload_of(metadata)
        if workload is None:
            continue
        placement = (metadata.get("labels") or {}).get(PLACEMENT_LABEL)
        tally = tallies.setdefault(workload, _Tally(placement))
        on = node_class(str((pod.get("spec") or {}).get("nodeName") or ""), nodes)
        hours = pod_gpu_request(pod.get("spec") or {}) * run_seconds(pod, now) / SECONDS_PER_HOUR
        if on is None or not hours:
            continue
        tally.hours[on] = tally.hours.get(on, 0.0) + hours
        if placement == ComputeClass.PREEMPTIBLE_FIRST:
            tally.first_hours[on] = tally.first_hours.get(on, 0.0) + hours
    return [_hours(workload, tally, price_per_gpu_hour) for workload, tally in sorted(tallies.items())]


def _hours(workload: str, tally: _Tally, price: float | None) -> WorkloadHours:
    # Standard costs the price, preemptible the price less the discount: an hour moved between them is
    # worth price x discount either way.
    per_hour = None if price is None else price * PREEMPTIBLE_DISCOUNT
    fallback = tally.first_hours.get(ComputeClass.STANDARD, 0.0)
    moved_back = tally.first_hours.get(ComputeClass.PREEMPTIBLE, 0.0)
    return WorkloadHours(
        workload=workload,
        placement=tally.placement,
        standard_gpu_hours=tally.hours.get(ComputeClass.STANDARD, 0.0),
        preemptible_gpu_hours=tally.hours.get(ComputeClass.PREEMPTIBLE, 0.0),
        fallback_cost=None if per_hour is None else fallback * per_hour,
        moving_back_saved=None if per_hour is None else moved_back * per_hour,
    )


def report(
    view: Mapping[str, Any] | None, now: datetime, price_per_gpu_hour: float | None, cluster: str = ""
) -> WorkloadsReport:
    """The workloads report of the Cluster resource ``cluster`` from its view (``None``: the cluster is
    gone, nothing to read)."""
    if view is None:
        return WorkloadsReport(unread="the cluster is gone")
    if view.get("error"):
        return WorkloadsReport(unread=str(view["error"]))
    return WorkloadsReport(stalled_workloads(view, cluster), gpu_hours(view, now, price_per_gpu_hour))


def any_stalled(reports: Sequence[WorkloadsReport | None]) -> bool:
    return any(r is not None and r.stalled for r in reports)
