"""drift.workloads on literal views: which workloads are stalled for capacity, GPU-hours by node class and
what falling back cost; and the exit code --fail-on-stalled gives drift."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from together_clusters.cli.drift.classify import (
    DriftReport,
    PendingChange,
)
from together_clusters.cli.drift.report import drift_text
from together_clusters.cli.drift.results import StackResult, fleet_exit_code
from together_clusters.cli.exit_codes import ExitCode
from together_clusters.cli.workloads import Stall, describe_stall, gpu_hours, run_seconds, stalled_workloads

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
NO_ROOM = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


def at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat()


def pod(name: str, placement: str | None = "preemptible-first", **status: object) -> dict:
    """A pod of component ``name`` in ``ml`` asking for 8 GPUs (``placement=None``: not a component's)."""
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "trial"}
    if placement is not None:
        labels["together.ai/placement"] = placement
    return {
        "metadata": {"name": f"{name}-pod", "namespace": "ml", "labels": labels},
        "spec": {
            "nodeName": status.pop("node", None),
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
        },
        "status": status,
    }


def unschedulable(name: str, since: str, message: str = NO_ROOM, placement: str | None = "preemptible-first"):
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    return pod(name, placement, phase="Pending", conditions=[{**scheduled, "lastTransitionTime": since}])


def ran(name: str, node: str, start: float, end: float | None, placement: str = "preemptible-first") -> dict:
    """A pod that ran on ``node`` from ``start`` to ``end`` minutes (``None``: still running)."""
    state = (
        {"running": {"startedAt": at(start)}}
        if end is None
        else {"terminated": {"startedAt": at(start), "finishedAt": at(end)}}
    )
    return pod(
        name, placement, node=node, phase="Running", containerStatuses=[{"name": "main", "state": state}]
    )


def test_pods_the_scheduler_cannot_place_and_unadmitted_kueue_workloads_are_stalled_since_their_oldest_wait():
    gated = pod(
        "sweep",
        phase="Pending",
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
    )
    kueue = {
        "metadata": {"name": "job-eval", "namespace": "ml"},
        "spec": {
            "podSets": [{"count": 2, "template": {"metadata": {"labels": pod("eval")["metadata"]["labels"]}}}]
        },
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "lastTransitionTime": at(5),
                    "message": "couldn't assign flavors to pod set main: insufficient unused quota",
                }
            ]
        },
    }
    finished = {
        **kueue,
        "status": {"conditions": [*kueue["status"]["conditions"], {"type": "Finished", "status": "True"}]},
    }
    view = {
        "pods": [
            unschedulable("sweep", at(10), "waits for a preemptible node"),
            unschedulable("sweep", at(3)),
            gated,  # Kueue's gate, not the scheduler's verdict
            unschedulable("controller", at(1), placement=None),  # no placement label: not a component's pod
            ran("train", "gpu-dp-1", 0, None),
        ],
        "kueue_workloads": [kueue, finished],
    }
    stalls = stalled_workloads(view, cluster="gpus")
    assert stalls == [
        Stall("ml/sweep", 2, at(3), NO_ROOM, "scheduler", "gpus"),
        Stall(
            "ml/eval",
            2,
            at(5),
            "couldn't assign flavors to pod set main: insufficient unused quota",
            "kueue",
            "gpus",
        ),
    ]
    assert describe_stall(stalls[0]) == (
        f"stalled for capacity: ml/sweep on gpus: 2 pods Pending since {at(3)}: {NO_ROOM}"
    )


def test_gpu_hours_by_node_class_with_the_fallback_cost_and_the_saving_at_the_stack_price():
    nodes = [
        {"metadata": {"name": "gpu-dp-1", "labels": {}}},
        {
            "metadata": {
                "name": "gpu-preemptible-dp-2",
                "labels": {"together.ai/compute-class": "preemptible"},
            }
        },
    ]
    view = {
        "nodes": nodes,
        "pods": [
            ran("sweep", "gpu-dp-1", 0, 120),  # 16 GPU-hours of fallback on standard
            ran("sweep", "gpu-preemptible-dp-2", 60, None),  # 8 GPU-hours on preemptible, still running
            # Its node was preempted and is gone: the class its name encodes.
            ran("eval", "gpu-preemptible-dp-9", 0, 30, placement="preemptible"),
            unschedulable("eval", at(30)),  # never ran: no hours
        ],
    }
    sweep, evaluation = sorted(
        gpu_hours(view, T0 + timedelta(minutes=120), 4.0), key=lambda h: h.workload, reverse=True
    )
    assert (sweep.workload, sweep.placement) == ("ml/sweep", "preemptible-first")
    assert (sweep.standard_gpu_hours, sweep.preemptible_gpu_hours) == (16.0, 8.0)
    # An hour on standard costs 4 and on preemptible 2: falling back cost 16 x 2, moving back saved 8 x 2.
    assert (sweep.fallback_cost, sweep.moving_back_saved) == (32.0, 16.0)
    # Plain PREEMPTIBLE never falls back: its hours cost and save nothing of the kind.
    assert (evaluation.standard_gpu_hours, evaluation.preemptible_gpu_hours) == (0.0, 4.0)
    assert (evaluation.fallback_cost, evaluation.moving_back_saved) == (0.0, 0.0)
    assert gpu_hours(view, T0, None)[0].fallback_cost is None


def test_run_time_is_the_union_of_the_containers_runs_restarts_included():
    running = {"running": {"startedAt": at(50)}}
    restarted = {"terminated": {"startedAt": at(0), "finishedAt": at(30)}}
    sidecar = {"terminated": {"startedAt": at(10), "finishedAt": at(40)}}
    statuses = [{"state": running, "lastState": restarted}, {"state": sidecar}]
    # 0-40 (the run before the restart and the sidecar overlap), then 50-60.
    assert run_seconds({"status": {"containerStatuses": statuses}}, T0 + timedelta(minutes=60)) == 50 * 60


def test_a_stalled_workload_is_information_that_fails_drift_only_with_fail_on_stalled():
    stall = Stall("ml/sweep", 1, at(0), NO_ROOM, "scheduler", "gpus")
    stalled = StackResult("dev", DriftReport(stalled=[stall]))
    pending = StackResult(
        "staging", DriftReport(pending=[PendingChange("gpus", "Cluster", "urn:x", "update")])
    )
    assert fleet_exit_code([stalled], fail_on_pending=False) == ExitCode.OK
    assert fleet_exit_code([stalled], fail_on_pending=False, fail_on_stalled=True) == ExitCode.STALLED
    assert fleet_exit_code([stalled, pending], fail_on_pending=True, fail_on_stalled=True) == ExitCode.PENDING
    text = drift_text("dev", stalled.report)  # type: ignore[arg-type]
    assert "in sync" in text and f"  - {describe_stall(stall)}" in text
