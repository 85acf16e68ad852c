"""The capacity status for people (tables) and for machines (JSON). Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..capacity import PREEMPTIBLE_DISCOUNT, Autoscaling, ClusterStatus, parse_time
from ..table import table
from ..workloads import WorkloadsReport, describe_stall
from .fleet import FleetReport
from .repairs import RepairsReport

HOURS_NOTE = "the pods the cluster still knows; a deleted pod's hours are gone with it"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def total_saving(statuses: Sequence[ClusterStatus]) -> float | None:
    savings = [s.hourly_saving for s in statuses if s.hourly_saving is not None]
    return sum(savings) if savings else None


@dataclass(frozen=True)
class StackStatus:
    """Everything ``status`` shows of one stack: its clusters over a window, and their workloads."""

    stack: str
    clusters: Sequence[ClusterStatus]
    start: datetime
    end: datetime
    price_per_gpu_hour: float | None = None
    workloads: Mapping[str, WorkloadsReport] = field(default_factory=dict)
    """Each cluster's workloads report, by cluster id."""
    repairs: Mapping[str, RepairsReport] = field(default_factory=dict)
    """Each cluster's node repairs (remediations), by cluster id."""
    fleets: Sequence[FleetReport] = ()
    """Each FleetQueue of the stack: its workers and the workloads its manager dispatches."""


def status_json(status: StackStatus, exit_code: int = 0) -> str:
    """The status as JSON; each cluster with its ``workloads`` (stalled ones, GPU-hours) and its node
    ``repairs`` (under way, recently ended; ``null`` when not read)."""
    return json.dumps(
        {
            "stack": status.stack,
            "exit_code": exit_code,
            "window": {"start": status.start.isoformat(), "end": status.end.isoformat()},
            "price_per_gpu_hour": status.price_per_gpu_hour,
            "preemptible_discount": PREEMPTIBLE_DISCOUNT,
            "clusters": [
                {
                    **s.to_dict(),
                    "workloads": _report_dict(status.workloads.get(s.cluster_id)),
                    "repairs": _report_dict(status.repairs.get(s.cluster_id)),
                }
                for s in status.clusters
            ],
            "total_hourly_saving": total_saving(status.clusters),
            "fleets": [f.to_dict() for f in status.fleets],
        },
        indent=2,
    )


def _report_dict(report: WorkloadsReport | RepairsReport | None) -> dict[str, object] | None:
    return None if report is None else report.to_dict()


def status_text(status: StackStatus, max_events: int = 20) -> str:
    """A summary table of every cluster, then each cluster's workloads (stalled ones, GPU-hours), node
    repairs and recent lifecycle events."""
    stack, statuses, start, end = status.stack, status.clusters, status.start, status.end
    price = status.price_per_gpu_hour
    if not statuses:
        return f"Stack {stack}: no Together clusters in the state.\n"
    parts = [f"Stack {stack}: {len(statuses)} cluster{'s' if len(statuses) != 1 else ''}"]
    rows = []
    for s in statuses:
        if not s.found:
            rows.append([s.resource, s.cluster_id, "MISSING (not found by the API)", "-", "-", "-", "-"])
            continue
        rows.append(
            [
                s.resource,
                s.cluster_id,
                s.status or "-",
                str(s.num_gpus) if s.autoscaling is None else _standard_range(s.autoscaling),
                f"{s.allocated_preemptible_gpus}/{s.desired_preemptible_gpus}",
                f"{s.standard_nodes}/{s.preemptible_nodes}",
                _money(s.hourly_saving),
            ]
        )
    parts.append(
        table(
            [
                "RESOURCE",
                "CLUSTER ID",
                "STATUS",
                "STANDARD GPUS",
                "PREEMPTIBLE GPUS (ALLOC/DESIRED)",
                "NODES (STD/PRE)",
                "SAVING/HOUR",
            ],
            rows,
        )
    )
    if price is not None:
        parts.append(
            f"Estimated saving: {_money(total_saving(statuses))}/hour "
            f"(allocated preemptible GPUs x ${price:g}/GPU-hour x {PREEMPTIBLE_DISCOUNT:.0%} discount)"
        )
    else:
        parts.append("Estimated saving: give --price-per-gpu-hour to estimate it.")
    for fleet in status.fleets:
        parts.extend(fleet_parts(fleet))
    span = f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"
    for s in statuses:
        if not s.found:
            continue
        report = status.workloads.get(s.cluster_id)
        if report is not None:
            parts.extend(workload_parts(s.resource, report))
        repairs = status.repairs.get(s.cluster_id)
        if repairs is not None:
            parts.extend(repair_parts(s.resource, repairs))
        if s.autoscaling is not None:
            parts.append(autoscaling_part(s.resource, s.autoscaling, max_events))
        shown = s.events[-max_events:]
        title = f"{s.resource}: node lifecycle events, {span}"
        if not shown:
            parts.append(f"{title}: none")
            continue
        if len(s.events) > len(shown):
            title += f" (last {len(shown)} of {len(s.events)})"
        parts.append(
            f"{title}\n"
            + table(
                ["TIME (UTC)", "EVENT", "NODE"],
                [[_short_time(e.timestamp), e.reason, e.node_id] for e in shown],
            )
        )
    return "\n\n".join(parts) + "\n"


def _standard_range(scaling: Autoscaling) -> str:
    """The live standard GPUs and the range autoscaling moves them in: ``24 (8-32)``."""
    ceiling = "?" if scaling.ceiling_gpus is None else str(scaling.ceiling_gpus)
    return f"{scaling.live_standard_gpus} ({scaling.floor_gpus}-{ceiling})"


def autoscaling_part(resource: str, scaling: Autoscaling, max_events: int = 20) -> str:
    """An autoscaling cluster's standard GPUs now, its floor and ceiling, and its recent scale events."""
    ceiling = "not known" if scaling.ceiling_gpus is None else str(scaling.ceiling_gpus)
    title = (
        f"{resource}: autoscaling: {scaling.live_standard_gpus} standard GPUs now (floor num_gpus "
        f"{scaling.floor_gpus}, ceiling auto_scale_max_gpus {ceiling}); scale events in the window"
    )
    shown = scaling.scale_events[-max_events:]
    if not shown:
        return f"{title}: none"
    rows = [[_short_time(e.timestamp), e.reason, e.node_id, e.message] for e in shown]
    return f"{title}:\n" + table(["TIME (UTC)", "EVENT", "NODE", "MESSAGE"], rows)


def fleet_parts(fleet: FleetReport) -> list[str]:
    """A fleet's workers (reachable from here, free preemptible GPUs) and the workloads its manager holds."""
    rows = [
        [
            w.name,
            w.cluster,
            "yes" if w.reachable else f"NO ({w.error})",
            "-" if w.free_preemptible_gpus is None else str(w.free_preemptible_gpus),
        ]
        for w in fleet.workers
    ]
    parts = [
        f"Fleet {fleet.name} (queue {fleet.queue}): workers in order of preference\n"
        + table(["WORKER", "CLUSTER", "REACHABLE", "FREE PREEMPTIBLE GPUS"], rows)
    ]
    if fleet.manager_error is not None:
        parts.append(f"Fleet {fleet.name}: its workloads could not be read: {fleet.manager_error}")
    elif not fleet.workloads:
        parts.append(f"Fleet {fleet.name}: no workloads")
    else:
        rows = [
            [w.name, w.state, w.worker or "-", ",".join(w.node_classes) or "-", str(w.failovers)]
            for w in fleet.workloads
        ]
        parts.append(
            f"Fleet {fleet.name}: workloads\n"
            + table(["WORKLOAD", "STATE", "WORKER", "NODES", "FAILOVERS"], rows)
        )
    return parts


def workload_parts(resource: str, report: WorkloadsReport) -> list[str]:
    """A cluster's stalled workloads (one line each) and its GPU-hours table."""
    if report.unread:
        return [f"{resource}: workloads not read: {report.unread}"]
    parts = []
    if report.stalled:
        parts.append("\n".join(describe_stall(stall) for stall in report.stalled))
    if report.hours:
        rows = [
            [
                h.workload,
                h.placement or "-",
                f"{h.standard_gpu_hours:.2f}",
                f"{h.preemptible_gpu_hours:.2f}",
                _money(h.fallback_cost),
                _money(h.moving_back_saved),
            ]
            for h in report.hours
        ]
        parts.append(
            f"{resource}: GPU-hours by workload ({HOURS_NOTE}):\n"
            + table(
                [
                    "WORKLOAD",
                    "PLACEMENT",
                    "STANDARD GPU-H",
                    "PREEMPTIBLE GPU-H",
                    "FALLBACK COST",
                    "MOVING BACK SAVED",
                ],
                rows,
            )
        )
    return parts


REPAIR_COLUMNS = ["NODE", "REMEDIATION", "MODE", "STATE", "TRIGGER"]


def repair_parts(resource: str, report: RepairsReport) -> list[str]:
    """A cluster's node repairs under way (with the workloads on each node), then those ended in the window."""
    if report.unread:
        return [f"{resource}: node repairs not read: {report.unread}"]
    title = f"{resource}: node repairs (remediations)"
    if not report.active:
        parts = [f"{title}: none under way"]
    else:
        rows = [
            [
                r.node,
                r.remediation_id,
                r.mode,
                r.state,
                r.trigger,
                _time_or_dash(r.since),
                ", ".join(r.workloads) or "-",
            ]
            for r in report.active
        ]
        parts = [
            f"{title} under way:\n" + table([*REPAIR_COLUMNS, "SINCE (UTC)", "WORKLOADS ON THE NODE"], rows)
        ]
    if report.recently_ended:
        rows = [
            [r.node, r.remediation_id, r.mode, r.state, r.trigger, _time_or_dash(r.ended_at)]
            for r in report.recently_ended
        ]
        parts.append(f"{title} ended in the window:\n" + table([*REPAIR_COLUMNS, "ENDED (UTC)"], rows))
    return parts


def _time_or_dash(stamp: str | None) -> str:
    return _short_time(stamp) if stamp else "-"


def _short_time(stamp: str) -> str:
    return f"{parse_time(stamp):%Y-%m-%d %H:%M:%S}"
