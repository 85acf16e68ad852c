"""The capacity status of a stack's clusters: allocation, nodes, recent events, savings. Pure.

Works on *snapshots*: plain dicts made from the API's cluster by ``together_clusters.cli.live`` (see ``snapshot``
there for the shape), so everything here is tested with literal dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from together_clusters.platform import GPUS_PER_NODE, ComputeClass, LifecycleReason, compute_class_of_node

# Preemptible GPUs are billed at half the on-demand price: a fixed platform discount.
PREEMPTIBLE_DISCOUNT = 0.5
LIFECYCLE_REASONS = frozenset(LifecycleReason)
"""Every reason the SDK or the platform's documentation names (a preemption goes by two names)."""


@dataclass(frozen=True)
class Event:
    timestamp: str
    reason: str
    node_id: str
    message: str


@dataclass(frozen=True)
class Autoscaling:
    """An autoscaling cluster's standard GPUs: live, the floor the code owns, the ceiling the platform grows
    to, and its recent scale events (standard nodes added or removed)."""

    live_standard_gpus: int
    floor_gpus: int
    """``num_gpus``: the program's, never the platform's scaling."""
    ceiling_gpus: int | None
    """``auto_scale_max_gpus``: the stack's input, else the reply's extra field; ``None``: not known."""
    scale_events: list[Event] = field(default_factory=list)


AUTOSCALING_SETTINGS = ("auto_scale", "auto_scale_max_gpus")
"""The Cluster inputs that say how it autoscales; the real API's reply does not report them."""


def with_stack_inputs(snapshot: Mapping[str, Any] | None, inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The snapshot with the autoscaling settings the stack's inputs hold (they win over any the reply had:
    the real API reports none)."""
    if snapshot is None:
        return None
    given = {k: inputs[k] for k in AUTOSCALING_SETTINGS if inputs.get(k) is not None}
    return {**snapshot, **given}


def autoscaling(snapshot: Mapping[str, Any], events: Sequence[Event]) -> Autoscaling | None:
    """The autoscaling of a cluster whose snapshot says ``auto_scale``; ``None`` for any other."""
    if snapshot.get("auto_scale") is not True:
        return None
    ceiling = snapshot.get("auto_scale_max_gpus")
    scaled = {LifecycleReason.SCALED_UP, LifecycleReason.SCALED_DOWN}
    classes = {n.get("node_id"): n.get("compute_class") for n in snapshot.get("nodes") or []}
    return Autoscaling(
        live_standard_gpus=GPUS_PER_NODE * int(snapshot.get("standard_nodes") or 0),
        floor_gpus=int(snapshot.get("num_gpus") or 0),
        # A state's number may be a float (32.0): inputs without a typed annotation.
        ceiling_gpus=int(ceiling)
        if isinstance(ceiling, int | float) and not isinstance(ceiling, bool)
        else None,
        scale_events=[
            e
            for e in events
            if e.reason in scaled
            and (classes.get(e.node_id) or compute_class_of_node(e.node_id)) != ComputeClass.PREEMPTIBLE
        ],
    )


@dataclass(frozen=True)
class ClusterStatus:
    """One Cluster resource of the stack and what the platform says about it now."""

    resource: str
    cluster_id: str
    found: bool
    cluster_name: str | None = None
    status: str | None = None
    num_gpus: int = 0
    desired_preemptible_gpus: int = 0
    allocated_preemptible_gpus: int = 0
    standard_nodes: int = 0
    preemptible_nodes: int = 0
    events: list[Event] = field(default_factory=list)
    hourly_saving: float | None = None
    autoscaling: Autoscaling | None = None
    """Set for a cluster created with ``auto_scale``."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_time(value: str | datetime) -> datetime:
    """An API timestamp (ISO 8601, ``Z`` or offset) as an aware UTC datetime."""
    if isinstance(value, datetime):
        moment = value
    else:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def hourly_saving(allocated_preemptible_gpus: int, price_per_gpu_hour: float) -> float:
    """What running these GPUs as preemptible saves per hour over on-demand."""
    return allocated_preemptible_gpus * price_per_gpu_hour * PREEMPTIBLE_DISCOUNT


def latest_time(snapshot: Mapping[str, Any]) -> datetime | None:
    """The newest moment the snapshot knows of (its clock may run ahead of ours, as the emulator's does)."""
    stamps = [e["timestamp"] for e in snapshot.get("events") or []]
    stamps += [
        t for n in snapshot.get("nodes") or [] for t in (n.get("appeared_at"), n.get("deleted_at")) if t
    ]
    if snapshot.get("observed_at"):
        stamps.append(snapshot["observed_at"])
    return max((parse_time(s) for s in stamps), default=None)


def window_end(snapshots: Sequence[Mapping[str, Any] | None], now: datetime) -> datetime:
    """The end of the reporting window: now, or later if the platform's clock is ahead of ours."""
    latest = [t for s in snapshots if s for t in [latest_time(s)] if t is not None]
    return max([now.astimezone(UTC), *latest])


def recent_events(snapshot: Mapping[str, Any], start: datetime, end: datetime) -> list[Event]:
    """Node lifecycle events (every :class:`LifecycleReason`) in ``[start, end]``, oldest first."""
    events = [
        Event(str(e["timestamp"]), str(e["reason"]), str(e.get("node_id", "")), str(e.get("message", "")))
        for e in snapshot.get("events") or []
        if e.get("reason") in LIFECYCLE_REASONS and start <= parse_time(e["timestamp"]) <= end
    ]
    return sorted(events, key=lambda e: parse_time(e.timestamp))


def cluster_status(
    resource: str,
    cluster_id: str,
    snapshot: Mapping[str, Any] | None,
    *,
    start: datetime,
    end: datetime,
    price_per_gpu_hour: float | None = None,
) -> ClusterStatus:
    """The status of one Cluster resource; ``snapshot`` is ``None`` when the cluster no longer exists."""
    if snapshot is None:
        return ClusterStatus(resource=resource, cluster_id=cluster_id, found=False)
    allocated = int(snapshot.get("allocated_preemptible_gpus") or 0)
    events = recent_events(snapshot, start, end)
    return ClusterStatus(
        resource=resource,
        cluster_id=cluster_id,
        found=True,
        cluster_name=snapshot.get("cluster_name"),
        status=snapshot.get("status"),
        num_gpus=int(snapshot.get("num_gpus") or 0),
        desired_preemptible_gpus=int(snapshot.get("desired_preemptible_gpus") or 0),
        allocated_preemptible_gpus=allocated,
        standard_nodes=int(snapshot.get("standard_nodes") or 0),
        preemptible_nodes=int(snapshot.get("preemptible_nodes") or 0),
        events=events,
        hourly_saving=None if price_per_gpu_hour is None else hourly_saving(allocated, price_per_gpu_hour),
        autoscaling=autoscaling(snapshot, events),
    )


def window(end: datetime, hours: float) -> tuple[datetime, datetime]:
    return end - timedelta(hours=hours), end
