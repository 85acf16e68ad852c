"""Emulated durations and the phase schedules of clusters and nodes.

All durations are nominal seconds of the platform. Cluster bring-up takes about ten minutes, which the CLI's
default speed of 60 shortens to about ten seconds of wall time (each schedule takes a ``duration`` function).
"""

from __future__ import annotations

from collections.abc import Callable

from together_clusters.platform import GRACE_PERIOD_LIMIT_SECONDS

from .clock import nominal
from .faults import ProvisioningOutcome
from .records import Timed

Duration = Callable[[float], float]
"""Turns a nominal duration into how long it takes on the platform's clock (see ``EmulatedClock.duration``)."""

READY = "CLUSTER_PHASE_READY"
ACCEPTANCE_TESTS_FAILED = "CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED"
CONTROL_PLANE_START_S = 10.0
DATA_PLANE_START_S = 120.0
# Offsets from cluster creation at which each bring-up phase starts.
CLUSTER_PHASE_OFFSETS: tuple[tuple[str, float], ...] = (
    ("CLUSTER_PHASE_QUEUED", 0.0),
    ("CLUSTER_PHASE_WAITING_FOR_CONTROL_PLANE_NODES", CONTROL_PLANE_START_S),
    ("CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES", DATA_PLANE_START_S),
    ("CLUSTER_PHASE_INSTALLING_DRIVERS", 300.0),
    ("CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS", 420.0),
    (READY, 600.0),
)
ACCEPTANCE_TESTS_FAIL_AFTER_S = 540.0
NCCL_TESTS_START_S = 500.0
NCCL_TESTS_FAIL_AFTER_S = 560.0

# Node bring-up, relative to the moment the node appears.
NODE_BOOTING_AFTER_S = 30.0
NODE_RUNNING_AFTER_S = 120.0
CONTROL_PLANE_RUNNING_AFTER_S = 100.0

# How long the fulfillment worker takes to notice free preemptible capacity and hand it out.
PREEMPTIBLE_FILL_DELAY_S = 30.0
DELETE_DURATION_S = 60.0
DEFAULT_GRACE_SECONDS = float(GRACE_PERIOD_LIMIT_SECONDS)
# Emulated seconds per real second unless told otherwise.
DEFAULT_SPEED = 60.0

STATUS_BY_PHASE: dict[str, str] = {
    # Status has no queued value: a queued cluster is waiting for its control plane.
    "CLUSTER_PHASE_QUEUED": "WaitingForControlPlaneNodes",
    "CLUSTER_PHASE_WAITING_FOR_CONTROL_PLANE_NODES": "WaitingForControlPlaneNodes",
    "CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES": "WaitingForDataPlaneNodes",
    "CLUSTER_PHASE_INSTALLING_DRIVERS": "InstallingDrivers",
    "CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS": "RunningAcceptanceTests",
    "CLUSTER_PHASE_RUNNING_NCCL_TESTS": "RunningAcceptanceTests",
    # Provisioning stopped for good; the phase says why, the status only that the cluster is not healthy.
    "CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED": "Degraded",
    "CLUSTER_PHASE_NCCL_TESTS_FAILED": "Degraded",
    "CLUSTER_PHASE_READY": "Ready",
    "CLUSTER_PHASE_DELETING": "Deleting",
}

NODE_STATUS_BY_PHASE: dict[str, str] = {
    "NODE_PHASE_PENDING": "Pending",
    "NODE_PHASE_BOOTING": "Booting",
    "NODE_PHASE_RUNNING": "Ready",
}


def cluster_schedule(
    created_at: float, outcome: ProvisioningOutcome, duration: Duration = nominal
) -> list[Timed]:
    """The phases a new cluster will go through, ending in READY unless a provisioning fault says otherwise."""
    phases = [Timed(phase=p, at=created_at + duration(off)) for p, off in CLUSTER_PHASE_OFFSETS]
    if outcome == "stuck":
        return [t for t in phases if t.at - created_at <= duration(DATA_PLANE_START_S)]
    if outcome == "acceptance_tests_failed":
        return phases[:-1] + [
            Timed(
                phase=ACCEPTANCE_TESTS_FAILED,
                at=created_at + duration(ACCEPTANCE_TESTS_FAIL_AFTER_S),
            )
        ]
    if outcome == "nccl_tests_failed":
        return phases[:-1] + [
            Timed(phase="CLUSTER_PHASE_RUNNING_NCCL_TESTS", at=created_at + duration(NCCL_TESTS_START_S)),
            Timed(phase="CLUSTER_PHASE_NCCL_TESTS_FAILED", at=created_at + duration(NCCL_TESTS_FAIL_AFTER_S)),
        ]
    return phases


def failed_at(schedule: list[Timed], at: float) -> list[Timed]:
    """The schedule of a cluster whose bring-up fails at ``at``: the phases entered by then, then its
    acceptance tests failed (what a cluster whose Kubernetes never serves comes to)."""
    return [
        *(t for t in schedule if t.at <= at and t.phase != READY),
        Timed(phase=ACCEPTANCE_TESTS_FAILED, at=at),
    ]


def node_schedule(appears_at: float, boots: bool = True, duration: Duration = nominal) -> list[Timed]:
    """PENDING at ``appears_at``, then BOOTING and RUNNING; a node that never boots stays PENDING."""
    pending = Timed(phase="NODE_PHASE_PENDING", at=appears_at)
    if not boots:
        return [pending]
    return [
        pending,
        Timed(phase="NODE_PHASE_BOOTING", at=appears_at + duration(NODE_BOOTING_AFTER_S)),
        Timed(phase="NODE_PHASE_RUNNING", at=appears_at + duration(NODE_RUNNING_AFTER_S)),
    ]


def control_plane_schedule(created_at: float, duration: Duration = nominal) -> list[Timed]:
    """The control plane node appears shortly after creation and is running before the data plane."""
    start = created_at + duration(CONTROL_PLANE_START_S)
    return [
        Timed(phase="NODE_PHASE_PENDING", at=start),
        Timed(phase="NODE_PHASE_BOOTING", at=start + duration(NODE_BOOTING_AFTER_S)),
        Timed(phase="NODE_PHASE_RUNNING", at=start + duration(CONTROL_PLANE_RUNNING_AFTER_S)),
    ]


def deleting_phase(at: float) -> Timed:
    """The phase a cluster enters when its deletion is requested."""
    return Timed(phase="CLUSTER_PHASE_DELETING", at=at)


def visible(schedule: list[Timed], now: float) -> list[Timed]:
    """The part of a schedule that has happened by ``now``."""
    return [t for t in schedule if t.at <= now]
