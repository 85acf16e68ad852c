"""drift.capacity, drift.timeline and the status/drift renderings, on literal snapshots."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from together_clusters.cli.capacity import (
    Autoscaling,
    cluster_status,
    hourly_saving,
    parse_time,
    recent_events,
    window,
    window_end,
    with_stack_inputs,
)
from together_clusters.cli.status.render import StackStatus, status_json, status_text
from together_clusters.cli.status.timeline import allocation_timeline, changes

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat()


def snapshot() -> dict:
    """A standard node; preemptible p1 (preempted, gone at +40), p2 (live), p3 (scaled up, then down)."""
    return {
        "cluster_id": "c-1",
        "cluster_name": "qs",
        "status": "Ready",
        "num_gpus": 8,
        "desired_preemptible_gpus": 16,
        "allocated_preemptible_gpus": 8,
        "standard_nodes": 1,
        "preemptible_nodes": 1,
        "nodes": [
            {
                "node_id": "s1",
                "compute_class": "standard",
                "num_gpus": 8,
                "appeared_at": at(0),
                "deleted_at": None,
            },
            {
                "node_id": "p2",
                "compute_class": "preemptible",
                "num_gpus": 8,
                "appeared_at": at(10),
                "deleted_at": None,
            },
            {
                "node_id": "p1",
                "compute_class": "preemptible",
                "num_gpus": 8,
                "appeared_at": at(10),
                "deleted_at": at(40),
            },
            {
                "node_id": "p3",
                "compute_class": "preemptible",
                "num_gpus": 8,
                "appeared_at": at(50),
                "deleted_at": at(60),
            },
        ],
        "events": [
            {
                "timestamp": at(10),
                "reason": "TogetherScaledUp",
                "node_id": "p1",
                "message": "Added preemptible node p1",
            },
            {
                "timestamp": at(10),
                "reason": "TogetherScaledUp",
                "node_id": "p2",
                "message": "Added preemptible node p2",
            },
            {"timestamp": at(35), "reason": "TogetherPreempted", "node_id": "p1", "message": "preempted"},
            {
                "timestamp": at(50),
                "reason": "TogetherScaledUp",
                "node_id": "p3",
                "message": "Added preemptible node p3",
            },
            {"timestamp": at(60), "reason": "TogetherScaledDown", "node_id": "p3", "message": "Removed p3"},
            {
                "timestamp": at(61),
                "reason": "TogetherScaledUp",
                "node_id": "s2",
                "message": "Added standard node s2",
            },
            {"timestamp": at(62), "reason": "SomethingElse", "node_id": "s1", "message": "ignored"},
        ],
        "observed_at": at(70),
    }


def test_saving_is_allocated_times_price_times_half():
    assert hourly_saving(16, 2.5) == 20.0
    assert hourly_saving(0, 2.5) == 0.0


def test_timeline_rebuilds_allocation_backwards_from_now():
    snap = snapshot()
    assert [(c[0], c[1]) for c in changes(snap)] == [
        (T0 + timedelta(minutes=10), 8),
        (T0 + timedelta(minutes=10), 8),
        (T0 + timedelta(minutes=40), -8),  # preempted at 35, gone at 40
        (T0 + timedelta(minutes=50), 8),
        (T0 + timedelta(minutes=60), -8),
    ]
    line = allocation_timeline(snap, T0, T0 + timedelta(minutes=70))
    assert [v for _, v in line.points] == [0, 8, 16, 8, 16, 8, 8]
    assert line.preemptions == [T0 + timedelta(minutes=35)]
    assert line.desired == 16


def test_timeline_window_that_starts_late_begins_at_the_right_value():
    line = allocation_timeline(snapshot(), T0 + timedelta(minutes=45), T0 + timedelta(minutes=70))
    assert line.points[0] == (T0 + timedelta(minutes=45), 8)
    assert [v for _, v in line.points] == [8, 16, 8, 8]
    assert line.preemptions == []


def test_preempted_node_still_in_grace_keeps_its_gpus_and_unknown_node_goes_at_the_event():
    snap = snapshot()
    snap["nodes"] = [n for n in snap["nodes"] if n["node_id"] != "p1"]  # the API no longer lists p1
    assert (T0 + timedelta(minutes=35), -8) in changes(snap)
    snap = snapshot()
    snap["nodes"][2]["deleted_at"] = None  # p1 cordoned but still live
    assert all(delta != -8 or moment != T0 + timedelta(minutes=40) for moment, delta in changes(snap))


def test_node_class_falls_back_to_the_event_message():
    snap = snapshot()
    for node in snap["nodes"]:
        node["compute_class"] = None
    assert changes(snap)[0] == (T0 + timedelta(minutes=10), 8)


def test_recent_events_are_the_lifecycle_ones_in_the_window():
    events = recent_events(snapshot(), T0 + timedelta(minutes=30), T0 + timedelta(minutes=70))
    assert [(e.reason, e.node_id) for e in events] == [
        ("TogetherPreempted", "p1"),
        ("TogetherScaledUp", "p3"),
        ("TogetherScaledDown", "p3"),
        ("TogetherScaledUp", "s2"),
    ]


def test_window_end_follows_a_platform_clock_that_runs_ahead():
    assert window_end([snapshot(), None], T0) == T0 + timedelta(minutes=70)
    later = T0 + timedelta(days=1)
    assert window_end([snapshot()], later) == later
    assert parse_time("2030-01-01T12:00:00Z") == T0


def test_status_text_and_json():
    start, end = window(T0 + timedelta(minutes=70), 24)
    statuses = [
        cluster_status("quickstart", "c-1", snapshot(), start=start, end=end, price_per_gpu_hour=2.0),
        cluster_status("gone", "c-2", None, start=start, end=end, price_per_gpu_hour=2.0),
    ]
    text = status_text(StackStatus("dev", statuses, start, end, 2.0))
    assert "quickstart" in text and "8/16" in text and "$8.00" in text
    assert "MISSING" in text and "TogetherPreempted" in text and "p3" in text
    assert "Estimated saving: $8.00/hour" in text
    data = json.loads(status_json(StackStatus("dev", statuses, start, end, 2.0)))
    assert data["total_hourly_saving"] == 8.0
    assert data["clusters"][0]["allocated_preemptible_gpus"] == 8
    assert len(data["clusters"][0]["events"]) == 6
    assert data["clusters"][1]["found"] is False
    no_price = status_text(StackStatus("dev", statuses[:1], start, end, None))
    assert "--price-per-gpu-hour" in no_price


def documented_snapshot() -> dict:
    """The platform's documented vocabulary: nodes named by class and without a marking, a node added as
    TogetherNodeAdded, a preemption announced as TogetherPreemptionNotified (and, for one node, under both
    names)."""
    return {
        "cluster_id": "c-2",
        "cluster_name": "docs",
        "desired_preemptible_gpus": 16,
        "allocated_preemptible_gpus": 8,
        "nodes": [
            {"node_id": "gpu-preemptible-dp-1", "num_gpus": 8, "appeared_at": at(10), "deleted_at": at(40)},
            {"node_id": "gpu-preemptible-dp-2", "num_gpus": 8, "appeared_at": at(20), "deleted_at": None},
            {"node_id": "gpu-dp-3", "num_gpus": 8, "appeared_at": at(25), "deleted_at": None},
        ],
        "events": [
            {
                "timestamp": at(10),
                "reason": "TogetherNodeAdded",
                "node_id": "gpu-preemptible-dp-1",
                "message": "a",
            },
            {
                "timestamp": at(20),
                "reason": "TogetherNodeAdded",
                "node_id": "gpu-preemptible-dp-2",
                "message": "a",
            },
            {"timestamp": at(25), "reason": "TogetherNodeAdded", "node_id": "gpu-dp-3", "message": "a"},
            {
                "timestamp": at(35),
                "reason": "TogetherPreemptionNotified",
                "node_id": "gpu-preemptible-dp-1",
                "message": "n",
            },
            {
                "timestamp": at(35),
                "reason": "TogetherPreempted",
                "node_id": "gpu-preemptible-dp-1",
                "message": "n",
            },
        ],
        "observed_at": at(70),
    }


def test_status_lists_every_documented_reason():
    events = recent_events(documented_snapshot(), T0, T0 + timedelta(hours=2))
    assert [e.reason for e in events] == [
        "TogetherNodeAdded",
        "TogetherNodeAdded",
        "TogetherNodeAdded",
        "TogetherPreemptionNotified",
        "TogetherPreempted",
    ]


def test_the_timeline_reads_the_documented_vocabulary():
    # +8 at 10 and at 20 (preemptible by name), none for the standard gpu-dp node; the preemption (under both
    # names) takes 8 once, when the node is deleted at 40.
    assert changes(documented_snapshot()) == [
        (T0 + timedelta(minutes=10), 8),
        (T0 + timedelta(minutes=20), 8),
        (T0 + timedelta(minutes=40), -8),
    ]
    line = allocation_timeline(documented_snapshot(), T0, T0 + timedelta(minutes=70))
    assert line.preemptions == [T0 + timedelta(minutes=35)]


# --- an autoscaling cluster (issue 42) ------------------------------------------------------------------


def autoscaling_snapshot() -> dict:
    """Floor 8, two standard nodes added by autoscaling (one removed since), a preemptible node filled."""
    added = {"num_gpus": 8, "deleted_at": None}
    return {
        "cluster_id": "c-3",
        "cluster_name": "auto",
        "status": "Ready",
        "num_gpus": 8,
        "desired_preemptible_gpus": 8,
        "allocated_preemptible_gpus": 8,
        "standard_nodes": 3,
        "preemptible_nodes": 1,
        "nodes": [
            {"node_id": "gpu-dp-3-1", "appeared_at": at(0), **added},
            {"node_id": "gpu-dp-3-2", "appeared_at": at(20), **added},
            {"node_id": "gpu-dp-3-3", "appeared_at": at(21), **added},
            {"node_id": "gpu-dp-3-4", "appeared_at": at(21), "num_gpus": 8, "deleted_at": at(50)},
            {"node_id": "gpu-preemptible-dp-3-5", "appeared_at": at(5), **added},
        ],
        "events": [
            {
                "timestamp": at(5),
                "reason": "TogetherScaledUp",
                "node_id": "gpu-preemptible-dp-3-5",
                "message": "p",
            },
            {"timestamp": at(20), "reason": "TogetherScaledUp", "node_id": "gpu-dp-3-2", "message": "up a"},
            {"timestamp": at(21), "reason": "TogetherScaledUp", "node_id": "gpu-dp-3-4", "message": "up b"},
            {"timestamp": at(50), "reason": "TogetherScaledDown", "node_id": "gpu-dp-3-4", "message": "idle"},
        ],
        "observed_at": at(70),
    }


def test_status_shows_an_autoscaling_clusters_live_gpus_floor_ceiling_and_scale_events():
    start, end = window(T0 + timedelta(minutes=70), 24)
    inputs = {"num_gpus": 8, "auto_scale": True, "auto_scale_max_gpus": 32}
    snap = with_stack_inputs(autoscaling_snapshot(), inputs)
    status = cluster_status("auto", "c-3", snap, start=start, end=end)
    assert status.autoscaling == Autoscaling(
        live_standard_gpus=24,
        floor_gpus=8,
        ceiling_gpus=32,
        scale_events=[e for e in status.events if e.node_id != "gpu-preemptible-dp-3-5"],
    )
    assert [e.reason for e in status.autoscaling.scale_events] == ["TogetherScaledUp"] * 2 + [
        "TogetherScaledDown"
    ]
    text = status_text(StackStatus("dev", [status], start, end))
    assert "24 (8-32)" in text
    assert (
        "auto: autoscaling: 24 standard GPUs now (floor num_gpus 8, ceiling auto_scale_max_gpus 32)" in text
    )
    assert "idle" in text and "up b" in text
    (shown,) = json.loads(status_json(StackStatus("dev", [status], start, end)))["clusters"]
    assert shown["autoscaling"]["live_standard_gpus"] == 24 and shown["autoscaling"]["ceiling_gpus"] == 32
    assert [e["node_id"] for e in shown["autoscaling"]["scale_events"]] == [
        "gpu-dp-3-2",
        "gpu-dp-3-4",
        "gpu-dp-3-4",
    ]


def test_the_ceiling_comes_from_the_stack_else_from_the_reply_and_a_plain_cluster_shows_none():
    start, end = window(T0 + timedelta(minutes=70), 24)
    from_reply = autoscaling_snapshot() | {"auto_scale": True, "auto_scale_max_gpus": 16}
    status = cluster_status(
        "auto", "c-3", with_stack_inputs(from_reply, {"num_gpus": 8}), start=start, end=end
    )
    assert status.autoscaling is not None and status.autoscaling.ceiling_gpus == 16
    stack_wins = with_stack_inputs(from_reply, {"auto_scale": True, "auto_scale_max_gpus": 32.0})
    assert stack_wins is not None and stack_wins["auto_scale_max_gpus"] == 32
    floats = cluster_status("auto", "c-3", stack_wins, start=start, end=end).autoscaling
    assert floats is not None and floats.ceiling_gpus == 32 and isinstance(floats.ceiling_gpus, int)
    unknown = cluster_status(
        "auto", "c-3", autoscaling_snapshot() | {"auto_scale": True}, start=start, end=end
    )
    assert unknown.autoscaling is not None and unknown.autoscaling.ceiling_gpus is None
    assert "ceiling auto_scale_max_gpus not known" in status_text(StackStatus("dev", [unknown], start, end))
    plain = cluster_status("quickstart", "c-1", with_stack_inputs(snapshot(), {}), start=start, end=end)
    assert plain.autoscaling is None
    assert "autoscaling" not in status_text(StackStatus("dev", [plain], start, end))
    assert with_stack_inputs(None, {"auto_scale": True}) is None


def test_a_snapshot_keeps_the_autoscaling_settings_an_emulator_with_extra_fields_reports():
    from together_clusters.cli.live import snapshot as live_snapshot
    from together_clusters.provider.models import Cluster

    base = {"cluster_id": "c-3", "cluster_name": "auto", "num_gpus": 8, "gpu_worker_nodes": []}
    reported = live_snapshot(Cluster.model_validate(base | {"auto_scale": True, "auto_scale_max_gpus": 32}))
    assert reported["auto_scale"] is True and reported["auto_scale_max_gpus"] == 32
    plain = live_snapshot(Cluster.model_validate(base))
    assert "auto_scale" not in plain and "auto_scale_max_gpus" not in plain
