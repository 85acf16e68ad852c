"""The ``together-clusters status`` subcommand: its arguments, and the capacity report of a stack's clusters."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import api_settings, capacity, live, workloads
from ..arguments import add_fail_on_stalled, add_project_options, add_stack_option, non_negative
from ..exit_codes import ExitCode
from ..stack_state import StateResource, clusters
from ..workspace import EngineSettings, StackInPlace, engine_call, export, open_workspace, selected_stack
from .fleet import arrivals_by_cluster, fleet_reports
from .render import StackStatus, status_json, status_text
from .repairs import RepairsReport, latest_repair_time, repairs_report
from .timeline import Timeline, allocation_timeline


def add_parser(sub: Any) -> None:
    """Register ``together-clusters status``."""
    status = sub.add_parser(
        "status",
        help="capacity of the stack's clusters: preemptible allocation, nodes, repairs, events, savings",
        description="Per cluster of the stack: desired and allocated preemptible GPUs, nodes, node repairs "
        "(remediations) under way with the workloads on each node, recent "
        "lifecycle events and the hourly saving of preemptible capacity; per workload (read from the "
        "cluster's Kubernetes API), whether it is stalled for capacity and the GPU-hours it ran on standard "
        "and preemptible nodes; per FleetQueue, each worker (reachable from here, its free preemptible GPUs) "
        "and each workload its manager dispatches (the worker and class of nodes it runs on, queued or moving, "
        "its failovers so far). Reads the state, never writes it. "
        f"Exit {ExitCode.OK:d} shown, {ExitCode.STALLED:d} a workload stalled with --fail-on-stalled, "
        f"{ExitCode.ERROR:d} error. "
        "The API key and endpoint are the stack's (together:apiKey, together:baseUrl, the endpoint a "
        "cluster was created on), else TOGETHER_API_KEY / TOGETHER_BASE_URL.",
    )
    add_stack_option(status)
    add_project_options(status)
    status.add_argument(
        "--price-per-gpu-hour",
        type=non_negative,
        default=None,
        metavar="P",
        help="on-demand price per GPU-hour, to estimate the saving (preemptible is 50%% off)",
    )
    status.add_argument(
        "--png", type=Path, default=None, metavar="FILE", help="also draw the allocation timeline to this PNG"
    )
    status.add_argument(
        "--window-hours",
        type=non_negative,
        default=24.0,
        metavar="H",
        help="how far back events and the timeline go (default 24)",
    )
    add_fail_on_stalled(status)


def run(args: argparse.Namespace) -> ExitCode:
    """Read the stack's clusters from its state and the API, print their capacity (``OK`` shown,
    ``STALLED`` a workload stalled with ``--fail-on-stalled``)."""
    workspace = open_workspace(EngineSettings(project_dir=args.cwd, pulumi=args.pulumi))
    stack = StackInPlace(args.stack or selected_stack(workspace), workspace)
    config = engine_call(f"reading the config of stack {stack.name}", stack.get_all_config)
    state = export(stack)
    resources = clusters(state)
    stack_api = api_settings.from_stack_config(config)
    snapshots = live.stack_snapshots(resources, stack_api, workloads=True, repairs=True)
    now = datetime.now(UTC)
    end = capacity.window_end(list(snapshots.values()), now)
    repaired = [t for s in snapshots.values() if s for t in [latest_repair_time(s)] if t is not None]
    end = max([end, *repaired])
    start, end = capacity.window(end, args.window_hours)
    price = args.price_per_gpu_hour
    statuses = [
        capacity.cluster_status(
            r.name,
            r.id,
            capacity.with_stack_inputs(snapshots.get(r.id), r.inputs),
            start=start,
            end=end,
            price_per_gpu_hour=price,
        )
        for r in resources
    ]
    # The pods' times are the Kubernetes API's, on our clock (not the platform's, which may run ahead).
    reports = {
        r.id: workloads.report((snapshots.get(r.id) or {}).get("kubernetes"), now, price, r.name)
        for r in resources
    }
    repairs = {r.id: _repairs(snap, start) for r in resources if (snap := snapshots.get(r.id)) is not None}
    fleets = fleet_reports(state, resources, snapshots)
    if args.png is not None:
        from .plot import write_png

        arrivals = arrivals_by_cluster(fleets)
        write_png(args.png, stack.name, _timelines(resources, snapshots, start, end, arrivals))
    stalled = args.fail_on_stalled and workloads.any_stalled(list(reports.values()))
    code = ExitCode.STALLED if stalled else ExitCode.OK
    shown = StackStatus(stack.name, statuses, start, end, price, reports, repairs, fleets)
    if args.json:
        print(status_json(shown, exit_code=code))
    else:
        print(status_text(shown), end="")
        if args.png is not None:
            print(f"\nTimeline written to {args.png}")
    return code


def _repairs(snapshot: dict[str, Any], start: datetime) -> RepairsReport:
    """A live cluster's node repairs: those under way, and those that ended since ``start``."""
    if snapshot.get("remediations_unread"):
        return RepairsReport(unread=str(snapshot["remediations_unread"]))
    nodes = snapshot.get("nodes") or []
    return repairs_report(snapshot.get("remediations") or [], nodes, snapshot.get("kubernetes"), start)


def _timelines(
    resources: Sequence[StateResource],
    snapshots: dict[str, Any],
    start: datetime,
    end: datetime,
    arrivals: Mapping[str, Sequence[str]] | None = None,
) -> list[tuple[str, Timeline]]:
    """One timeline per live cluster, from the window's start or the cluster's creation, whichever is later;
    ``arrivals``: by cluster resource name, when moved fleet workloads started running there."""
    lines = []
    for res in resources:
        snap = snapshots.get(res.id)
        if snap is None:
            continue
        created = snap.get("created_at")
        begin = max(start, capacity.parse_time(created)) if created else start
        line = allocation_timeline(snap, begin, end)
        moved = [capacity.parse_time(t) for t in (arrivals or {}).get(res.name, ())]
        if moved:
            line = dataclasses.replace(line, arrivals=[t for t in moved if begin <= t <= end])
        lines.append((res.name, line))
    return lines
