"""``status`` over a FleetQueue (issue 31, part 6), from a state export and the clusters' Kubernetes views shaped
as the real Kueue v0.17 and JobSet write them (tests/twin/test_engine_fleet.py reads the same from the real
controllers after a failover and while a worker does not answer)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from together_clusters.cli.stack_state import clusters
from together_clusters.cli.status.fleet import fleet_reports, free_preemptible_gpus
from together_clusters.cli.status.render import StackStatus, fleet_parts, status_json
from together_clusters.provider.schema import CLUSTER_TYPE

URN = "urn:pulumi:dev::fleet::"


def cluster(name: str, cluster_id: str) -> dict[str, Any]:
    return {"urn": f"{URN}{CLUSTER_TYPE}::{name}", "type": CLUSTER_TYPE, "custom": True, "id": cluster_id}


EXPORT = {
    "deployment": {
        "resources": [
            cluster("hub", "c-hub"),
            cluster("east", "c-east"),
            cluster("west", "c-west"),
            {
                "urn": f"{URN}together:components:FleetQueue::fleet",
                "type": "together:components:FleetQueue",
                "outputs": {
                    "local_queue_name": "fleet",
                    "namespace": "default",
                    "workers": ["east", "west"],
                    "worker_clusters": {
                        "east": f"{URN}{CLUSTER_TYPE}::east",
                        "west": f"{URN}{CLUSTER_TYPE}::west",
                    },
                    "manager_cluster": f"{URN}{CLUSTER_TYPE}::hub",
                },
            },
        ]
    }
}


def node(name: str, compute_class: str, gpus: int = 8, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"together.ai/compute-class": compute_class}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "96"}},
    }


def pod(job_set: str, node_name: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{job_set}-trial-0-0-abcde",
            "namespace": "default",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": job_set,
                "jobset.sigs.k8s.io/jobset-uid": "5f0c",
                "together.ai/placement": "preemptible",
            },
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": phase, "startTime": "2026-12-03T07:40:05Z"},
    }


def workload(
    job_set: str, cluster_name: str | None, conditions: dict[str, str], evictions: int = 0
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": kind, "status": value, "reason": "x"} for kind, value in conditions.items()]
    }
    if cluster_name:
        status["clusterName"] = cluster_name
    if evictions:
        status["schedulingStats"] = {
            "evictions": [{"reason": "AdmissionCheck", "underlyingCause": "", "count": evictions}]
        }
    return {
        "metadata": {
            "name": f"jobset-{job_set}-1a2b3",
            "namespace": "default",
            "ownerReferences": [{"kind": "JobSet", "name": job_set, "controller": True, "uid": "m-1"}],
        },
        "spec": {"queueName": "fleet"},
        "status": status,
    }


HUB = {
    "pods": [],
    "nodes": [node("hub-std-0", "standard")],
    "kueue_workloads": [
        workload("ablation-0", "fleet-east", {"QuotaReserved": "True", "Admitted": "True"}, evictions=1),
        workload("ablation-1", None, {"QuotaReserved": "False", "Evicted": "True"}, evictions=2),
        workload("ablation-2", None, {"QuotaReserved": "False"}),
        workload("ablation-3", "fleet-west", {"QuotaReserved": "True", "Admitted": "True"}),
    ],
}
EAST = {
    "pods": [pod("ablation-0", "east-pre-0", 4), pod("ablation-9", "east-pre-0", 2, phase="Succeeded")],
    "nodes": [
        node("east-std-0", "standard"),
        node("east-pre-0", "preemptible"),
        node("east-pre-1", "preemptible", unschedulable=True),  # cordoned: preempted, not free
    ],
}


def reports(east: dict[str, Any]) -> Any:
    snapshots = {
        "c-hub": {"kubernetes": HUB},
        "c-east": {"kubernetes": east},
        "c-west": {
            "kubernetes": {"error": "its Kubernetes API at https://west did not answer (ReadTimeoutError)"}
        },
    }
    return fleet_reports(EXPORT, clusters(EXPORT), snapshots)


def test_each_workload_shows_where_it_runs_on_which_nodes_and_its_failovers() -> None:
    (fleet,) = reports(EAST)
    by_name = {w.name: w for w in fleet.workloads}
    running = by_name["default/ablation-0"]
    assert (running.state, running.worker, running.node_classes, running.failovers) == (
        "running",
        "east",
        ("preemptible",),
        1,
    )
    assert (by_name["default/ablation-1"].state, by_name["default/ablation-1"].failovers) == ("moving", 2)
    assert by_name["default/ablation-2"].state == "queued"
    # Admitted to a worker that does not answer: no pod seen there, so not shown as running.
    assert (by_name["default/ablation-3"].state, by_name["default/ablation-3"].worker) == ("admitted", "west")


def test_each_worker_shows_whether_it_answers_and_its_free_preemptible_gpus() -> None:
    (fleet,) = reports(EAST)
    east, west = fleet.workers
    assert (east.name, east.cluster, east.reachable, east.free_preemptible_gpus) == ("east", "east", True, 4)
    assert (west.reachable, west.free_preemptible_gpus) == (False, None)
    assert "did not answer" in (west.error or "")
    # A finished pod holds nothing; a cordoned node offers nothing.
    assert free_preemptible_gpus({"nodes": [node("n", "preemptible")], "pods": []}) == 8


def test_the_fleet_is_in_the_text_and_the_json() -> None:
    (fleet,) = reports(EAST)
    now = datetime(2026, 12, 3, tzinfo=UTC)
    shown = StackStatus("dev", [], now, now, fleets=[fleet])
    document = json.loads(status_json(shown))
    (found,) = document["fleets"]
    assert found["workers"][1]["reachable"] is False
    assert {w["name"]: w["worker"] for w in found["workloads"]}["default/ablation-0"] == "east"
    text = "\n".join(fleet_parts(fleet))
    assert "Fleet fleet (queue fleet): workers in order of preference" in text
    assert re.search(r"^ *east +east +yes +4$", text, re.M), text
    assert re.search(r"^ *west +west +NO \(its Kubernetes API at https://west did not answer", text, re.M), (
        text
    )
    assert re.search(r"^ *default/ablation-0 +running +east +preemptible +1$", text, re.M), text
    assert re.search(r"^ *default/ablation-1 +moving +- +- +2$", text, re.M), text


def test_a_manager_that_does_not_answer_is_said_and_its_workers_still_shown() -> None:
    snapshots = {"c-hub": {"kubernetes": {"error": "its Kubernetes API at https://hub did not answer"}}}
    (fleet,) = fleet_reports(EXPORT, clusters(EXPORT), snapshots)
    assert fleet.manager_error is not None and "did not answer" in fleet.manager_error
    assert [w.reachable for w in fleet.workers] == [False, False]
    assert "Fleet fleet: its workloads could not be read: its Kubernetes API at https://hub" in "\n".join(
        fleet_parts(fleet)
    )


def test_the_timeline_marks_where_a_moved_workload_arrived() -> None:
    from datetime import timedelta

    from together_clusters.cli.status.fleet import arrivals_by_cluster
    from together_clusters.cli.status.plot import figure
    from together_clusters.cli.status.timeline import Timeline

    (fleet,) = reports(EAST)
    # Only ablation-0 moved (a failover) and runs: its arrival in the east, on the east cluster's line.
    assert arrivals_by_cluster([fleet]) == {"east": ["2026-12-03T07:40:05Z"]}
    start = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)
    arrived = datetime(2026, 12, 3, 7, 40, 5, tzinfo=UTC)
    line = Timeline(
        points=[(start, 8), (start + timedelta(hours=1), 8)], preemptions=[], desired=8, arrivals=[arrived]
    )
    drawn = figure("dev", [("east", line)])
    try:
        (ax,) = drawn.axes
        labels = [text.get_text() for text in ax.get_legend().get_texts()]
        assert "workload moved here" in labels
    finally:
        import matplotlib.pyplot as plt

        plt.close(drawn)
