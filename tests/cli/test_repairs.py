"""What ``status`` shows of node repairs (remediations), and what ``drift`` makes of a repaired node. Plain data.

The rows of ``status`` come from the API's remediations, the cluster's nodes and the Kubernetes view (which
pods run where); the timeline marks the repairs' Node Events beside the preemptions; ``drift`` compares the
code with the refreshed inputs, where a repair that evicts a node shows as a lower count (an update back,
never a replace, never a change of the code) and one that replaces a VM shows nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.cli.test_classify import AS_DEPLOYED, cluster, export, inputs, step
from together_clusters.cli.capacity import ClusterStatus
from together_clusters.cli.drift.classify import classify
from together_clusters.cli.exit_codes import ExitCode
from together_clusters.cli.status.render import StackStatus, status_json, status_text
from together_clusters.cli.status.repairs import RepairsReport, repairs_report
from together_clusters.cli.status.timeline import Timeline, allocation_timeline
from together_clusters.platform import PLACEMENT_LABEL, RemediationReason, kubernetes_node_name
from together_clusters.provider.rules import plan_change

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
HOST = "GPU-Standard-DP1-001"
NODE = kubernetes_node_name(HOST)
OTHER_HOST = "gpu-preemptible-dp2-001"


def iso(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat()


def remediation(rid: str, state: str, **fields: Any) -> dict[str, Any]:
    base = {
        "id": rid,
        "instance_id": "i-1",
        "instance_name": HOST,
        "mode": "REMEDIATION_MODE_HOST_AWARE",
        "state": state,
        "trigger": "REMEDIATION_TRIGGER_AUTOMATED",
        "create_time": iso(0),
        "start_time": None,
        "end_time": None,
        "review_time": None,
    }
    return {**base, **fields}


def pod(name: str, component: str | None, node: str, phase: str = "Running") -> dict[str, Any]:
    labels = {PLACEMENT_LABEL: "preemptible"} if component else {}
    if component:
        labels["app.kubernetes.io/name"] = component
    return {
        "metadata": {"name": name, "namespace": "ml", "labels": labels},
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


NODES = [
    {"node_id": "n1", "host_name": HOST, "instance_id": "i-1"},
    {"node_id": "n2", "host_name": OTHER_HOST, "instance_id": "i-2"},
]
VIEW = {
    "pods": [
        pod("a-0", "trainer", NODE),
        pod("a-1", "trainer", NODE),
        pod("b-0", "eval", NODE, phase="Succeeded"),  # finished: no longer on the node
        pod("c-0", "server", OTHER_HOST),
        pod("ctl", None, NODE),  # not a component's pod
    ],
    "nodes": [],
}


def test_an_active_repair_is_a_row_per_node_with_short_mode_state_trigger_since_and_its_workloads() -> None:
    report = repairs_report([remediation("rem-1", "PENDING_APPROVAL")], NODES, VIEW, T0 - timedelta(hours=1))
    [row] = report.active
    assert (row.node, row.remediation_id, row.instance_id) == (NODE, "rem-1", "i-1")
    assert (row.mode, row.state, row.trigger) == ("host-aware", "PENDING_APPROVAL", "AUTOMATED")
    assert row.since == iso(0)
    assert row.workloads == ["ml/trainer"]
    assert report.recently_ended == [] and report.unread is None


def test_since_is_when_the_repair_entered_its_state_as_far_as_the_api_tells() -> None:
    approved = remediation("rem-1", "PENDING", review_time=iso(5))
    running = remediation("rem-2", "RUNNING", instance_id="i-2", instance_name=OTHER_HOST, start_time=iso(7))
    report = repairs_report([approved, running], NODES, VIEW, T0)
    assert {r.remediation_id: r.since for r in report.active} == {"rem-1": iso(5), "rem-2": iso(7)}
    assert {r.remediation_id: r.workloads for r in report.active} == {
        "rem-1": ["ml/trainer"],
        "rem-2": ["ml/server"],
    }


def test_a_repair_without_instance_name_is_mapped_through_the_nodes_host_name() -> None:
    report = repairs_report([remediation("rem-1", "PENDING", instance_name=None)], NODES, VIEW, T0)
    assert [r.node for r in report.active] == [NODE]


def test_ended_repairs_are_shown_only_when_they_ended_in_the_window() -> None:
    ended_in = remediation("rem-new", "SUCCEEDED", mode="REMEDIATION_MODE_VM_ONLY", end_time=iso(30))
    ended_before = remediation("rem-old", "CANCELLED", end_time=iso(-120))
    report = repairs_report([ended_in, ended_before], NODES, None, T0)
    assert report.active == []
    [row] = report.recently_ended
    assert (row.remediation_id, row.mode, row.state, row.ended_at) == (
        "rem-new",
        "vm-only",
        "SUCCEEDED",
        iso(30),
    )
    assert row.workloads == []  # no Kubernetes view: nothing known of the pods


def test_status_json_and_text_show_the_repairs_per_cluster() -> None:
    cluster = ClusterStatus("gpu", "c-1", True, status="Ready", num_gpus=8)
    report = repairs_report([remediation("rem-1", "PENDING_APPROVAL")], NODES, VIEW, T0)
    shown = StackStatus("dev", [cluster], T0, T0 + timedelta(hours=1), repairs={"c-1": report})

    [data] = json.loads(status_json(shown))["clusters"]
    assert data["repairs"]["unread"] is None
    [row] = data["repairs"]["active"]
    assert row["remediation_id"] == "rem-1" and row["node"] == NODE and row["workloads"] == ["ml/trainer"]

    text = status_text(shown)
    assert "gpu: node repairs (remediations) under way" in text
    [line] = [line for line in text.splitlines() if "rem-1" in line]
    assert line.split() == [
        NODE,
        "rem-1",
        "host-aware",
        "PENDING_APPROVAL",
        "AUTOMATED",
        "2026-12-01",
        "09:00:00",
        "ml/trainer",
    ]


def test_status_text_says_when_repairs_could_not_be_read_or_there_are_none() -> None:
    cluster = ClusterStatus("gpu", "c-1", True, status="Ready")
    unread = StackStatus(
        "dev", [cluster], T0, T0, repairs={"c-1": RepairsReport(unread="the API answered 404")}
    )
    assert "gpu: node repairs not read: the API answered 404" in status_text(unread)
    none = StackStatus("dev", [cluster], T0, T0, repairs={"c-1": RepairsReport()})
    assert "gpu: node repairs (remediations): none under way" in status_text(none)


# --- the timeline ------------------------------------------------------------------------------------


def node_event(reason: str, node: str, minutes: float) -> dict[str, Any]:
    return {
        "reason": reason,
        "involvedObject": {"kind": "Node", "name": node},
        "lastTimestamp": iso(minutes),
        "message": "...",
    }


def test_the_timeline_marks_the_repairs_node_events_within_the_window() -> None:
    snapshot = {
        "allocated_preemptible_gpus": 8,
        "desired_preemptible_gpus": 8,
        "kubernetes": {
            "node_events": [
                node_event(RemediationReason.STARTED, NODE, 10),
                node_event(RemediationReason.SUCCEEDED, "gpu-new", 20),
                node_event(RemediationReason.STARTED, NODE, -10),  # before the window
                node_event("NodeNotReady", NODE, 15),  # not a repair
            ]
        },
    }
    line = allocation_timeline(snapshot, T0, T0 + timedelta(hours=1))
    assert line.repairs == [T0 + timedelta(minutes=10), T0 + timedelta(minutes=20)]
    assert allocation_timeline({"kubernetes": {"error": "no"}}, T0, T0).repairs == []


def test_the_png_draws_repairs_with_their_own_marker_and_legend_entry() -> None:
    import matplotlib.pyplot as plt

    from together_clusters.cli.status.plot import figure

    line = Timeline(
        points=[(T0, 8), (T0 + timedelta(hours=1), 8)],
        preemptions=[T0 + timedelta(minutes=20)],
        desired=8,
        repairs=[T0 + timedelta(minutes=10)],
    )
    fig = figure("dev", [("gpu", line)])
    try:
        [ax] = fig.axes
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "preemption" in labels and "node repair" in labels
        markers = {
            c.get_label(): c.get_paths()[0].vertices.tolist()
            for c in ax.collections
            if c.get_label() in labels
        }
        assert markers["node repair"] != markers["preemption"]
    finally:
        plt.close(fig)


# --- drift -------------------------------------------------------------------------------------------


def test_an_eviction_without_replacement_is_a_lower_count_restored_by_an_update_never_a_change_of_the_code() -> (
    None
):
    # The emulator lowers num_gpus by a standard node's 8 GPUs, desired_preemptible_gpus by a preemptible
    # node's (docs/concepts/remediations.md): the refresh reads that back as the input.
    for field in ("num_gpus", "num_preemptible_gpus"):
        live = inputs(**{field: 0})
        plan = plan_change(live, inputs())
        assert (plan.replace, plan.update, plan.refusals) == ([], [field], []), plan

        report = classify(export(cluster()), [step("update", live, inputs(), (field,))], AS_DEPLOYED)
        assert report.pending == [], report.pending  # not the code's doing
        [drift] = report.drift
        assert (drift.field, drift.code, drift.live, drift.deployed) == (field, 8, 0, 8)
        assert report.exit_code() == ExitCode.DRIFT


def test_a_vm_replaced_by_a_repair_is_no_drift_at_all() -> None:
    # A VM_ONLY (or HOST_AWARE) repair changes the node's instance id and host name, never an input; the
    # refreshed outputs (nodes per class, allocation) are what they were.
    report = classify(export(cluster()), [step("same", inputs(), inputs())], AS_DEPLOYED)
    assert report.in_sync and report.pending == [] and report.drift == [] and report.shortfall == []


def test_the_window_reaches_the_newest_repair_time_of_a_platform_clock_ahead_of_ours() -> None:
    from together_clusters.cli.status.repairs import latest_repair_time

    snapshot = {
        "remediations": [remediation("rem-1", "SUCCEEDED", start_time=iso(5), end_time=iso(9))],
        "kubernetes": {"node_events": [node_event(RemediationReason.SUCCEEDED, NODE, 12)]},
    }
    assert latest_repair_time(snapshot) == T0 + timedelta(minutes=12)
    assert latest_repair_time({"kubernetes": {"error": "unread"}}) is None
