"""The capacity status for people (tables) and for machines (JSON). Pure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from .capacity import PREEMPTIBLE_DISCOUNT, ClusterStatus, parse_time
from .table import table


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def total_saving(statuses: Sequence[ClusterStatus]) -> float | None:
    savings = [s.hourly_saving for s in statuses if s.hourly_saving is not None]
    return sum(savings) if savings else None


def status_json(
    stack: str, statuses: Sequence[ClusterStatus], start: datetime, end: datetime, price: float | None
) -> str:
    return json.dumps(
        {
            "stack": stack,
            "window": {"start": start.isoformat(), "end": end.isoformat()},
            "price_per_gpu_hour": price,
            "preemptible_discount": PREEMPTIBLE_DISCOUNT,
            "clusters": [s.to_dict() for s in statuses],
            "total_hourly_saving": total_saving(statuses),
        },
        indent=2,
    )


def status_text(
    stack: str,
    statuses: Sequence[ClusterStatus],
    start: datetime,
    end: datetime,
    price: float | None,
    max_events: int = 20,
) -> str:
    """A summary table of every cluster, then each cluster's recent lifecycle events."""
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
                str(s.num_gpus),
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
    span = f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"
    for s in statuses:
        if not s.found:
            continue
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


def _short_time(stamp: str) -> str:
    return f"{parse_time(stamp):%Y-%m-%d %H:%M:%S}"
