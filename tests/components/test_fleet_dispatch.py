"""The fleet dispatcher's decisions as plain data (:mod:`together_clusters.components.fleet_dispatch.plan`) and
its objects (:mod:`together_clusters.components.manifests.fleet_dispatch`). The real Kueue, MultiKueue and
API servers judge it in tests/twin/test_engine_fleet.py; here, each class's order, bursts, patience and a worker
that stops answering, and that its code runs on a bare interpreter with nothing but what its ConfigMap holds."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from together_clusters.components import FleetDispatchArgs, FleetQueueArgs
from together_clusters.components.fleet_dispatch import __main__ as dispatch_main
from together_clusters.components.fleet_dispatch import plan
from together_clusters.components.fleet_dispatch.nomination import (
    ADMISSION_MANAGER,
    PROMPT_CONDITION,
    PROMPT_MANAGER,
    nomination_apply,
    retry_apply,
)
from together_clusters.components.fleet_dispatch.plan import Pending, PodSetDemand
from together_clusters.components.manifests import fleet_dispatch as builder
from together_clusters.components.manifests import fleet_queue
from together_clusters.errors import DispatchRequestError
from together_clusters.platform import COMPUTE_CLASS_LABEL, PLACEMENT_LABEL, PREEMPTIBLE, ComputeClass

from .conftest import assert_schema_valid

P, F, S = ComputeClass.PREEMPTIBLE, ComputeClass.PREEMPTIBLE_FIRST, ComputeClass.STANDARD
WORKERS = ["east", "west"]


def room(preemptible: list[int] | None = None, standard: list[int] | None = None) -> plan.Room:
    return {P: list(preemptible or []), S: list(standard or [])}


def one(
    compute_class: ComputeClass, gpus: int = 1, count: int = 1, key: str = "default/a", **kw: Any
) -> Pending:
    return Pending(key, (PodSetDemand(compute_class, count, gpus),), **kw)


def decide(
    pending: list[Pending], rooms: dict[str, plan.Room | None], patience: float = 30
) -> dict[str, str]:
    return {key: d.worker for key, d in plan.nominations(pending, WORKERS, rooms, patience).items()}


# --- each class's order ----------------------------------------------------------------------------


def test_preemptible_goes_to_the_first_listed_worker_with_preemptible_room() -> None:
    assert decide([one(P)], {"east": room([8]), "west": room([8])}) == {"default/a": "east"}
    assert decide([one(P)], {"east": room([], [8]), "west": room([8])}) == {"default/a": "west"}


def test_preemptible_with_no_room_anywhere_waits_with_the_first_worker_never_on_standard() -> None:
    assert decide([one(P)], {"east": room([], [8]), "west": room([], [8])}) == {"default/a": "east"}
    # Already waiting there: nothing changes.
    waiting = one(P, nominated="east", held_seconds=600)
    assert decide([waiting], {"east": room([], [8]), "west": room([], [8])}) == {}


def test_preemptible_first_takes_preemptible_room_anywhere_before_standard_room_in_the_first() -> None:
    assert decide([one(F)], {"east": room([], [8]), "west": room([8])}) == {"default/a": "west"}
    assert decide([one(F)], {"east": room([], [8]), "west": room([], [8])}) == {"default/a": "east"}
    assert decide([one(F)], {"east": room([8]), "west": room([8])}) == {"default/a": "east"}
    assert decide([one(F)], {"east": room([], []), "west": room([], [8])}) == {"default/a": "west"}


def test_standard_goes_to_the_first_listed_worker_with_standard_room() -> None:
    assert decide([one(S)], {"east": room([8], [8]), "west": room([8], [8])}) == {"default/a": "east"}
    assert decide([one(S)], {"east": room([8], [0]), "west": room([], [8])}) == {"default/a": "west"}


def test_a_training_runs_pod_sets_all_fit_on_one_worker() -> None:
    """A coordinator without GPUs on a standard node, two workers of 4 GPUs on preemptible ones."""
    run = Pending("default/llm", (PodSetDemand(S, 1, 0), PodSetDemand(P, 2, 4)))
    # The east's 6 free GPUs are on two nodes: two 4-GPU pods do not fit there, they do on the west's node.
    assert decide([run], {"east": room([3, 3]), "west": room([8])}) == {"default/llm": "west"}


# --- bursts, patience, workers that stop answering -------------------------------------------------


def test_a_burst_is_spread_as_it_fits_node_by_node() -> None:
    burst = [one(P, gpus=8, key=f"default/w{i}") for i in range(3)]
    assert decide(burst, {"east": room([8]), "west": room([8, 8])}) == {
        "default/w0": "east",
        "default/w1": "west",
        "default/w2": "west",
    }


def test_a_workload_sent_to_a_worker_stays_its_patience_before_a_better_one() -> None:
    rooms: dict[str, plan.Room | None] = {"east": room([8]), "west": room([8])}
    assert decide([one(P, nominated="west", held_seconds=5)], rooms) == {}
    assert decide([one(P, nominated="west", held_seconds=31)], rooms) == {"default/a": "east"}
    # Its stay counts against the room where it is: the next workload goes elsewhere.
    later = one(P, gpus=8, key="default/b")
    assert decide([one(P, gpus=8, nominated="west", held_seconds=5), later], rooms) == {"default/b": "east"}


def test_a_workload_whose_worker_stops_answering_moves_at_once() -> None:
    rooms: dict[str, plan.Room | None] = {"east": None, "west": room([8])}
    assert decide([one(P, nominated="east", held_seconds=1)], rooms) == {"default/a": "west"}
    # With room nowhere it waits with a worker that answers.
    assert decide([one(P, nominated="east")], {"east": None, "west": room([])}) == {"default/a": "west"}
    assert decide([one(P, nominated="east")], {"east": None, "west": None}) == {}


# --- a worker that lost the room a workload needs ---------------------------------------------------


def moved(placed: list[plan.Placed], rooms: dict[str, plan.Room | None]) -> dict[str, str]:
    return {key: d.worker for key, d in plan.moves(placed, WORKERS, rooms).items()}


def test_a_workload_whose_worker_lost_its_room_moves_to_a_worker_that_has_it_at_once() -> None:
    """Its pods' nodes went (preempted, not refilled): the scheduler finds none, the count finds no room
    there, the east has room for the whole workload: given back now, not after the worker's PodsReady
    timeout."""
    trial = plan.Placed("default/t", "west", (PodSetDemand(P, 1, 1),), (PodSetDemand(P, 1, 1),))
    assert moved([trial], {"east": room([8]), "west": room([], [8])}) == {"default/t": "east"}
    # A training run: its coordinator still runs on the west's standard node, its workers have nowhere.
    run = plan.Placed(
        "default/llm", "west", (PodSetDemand(S, 1, 0), PodSetDemand(P, 2, 4)), (PodSetDemand(P, 1, 4),) * 2
    )
    assert moved([run], {"east": room([8]), "west": room([], [8])}) == {"default/llm": "east"}


def test_a_workload_stays_while_its_worker_has_room_or_no_other_worker_has() -> None:
    trial = plan.Placed("default/t", "west", (PodSetDemand(P, 1, 1),), (PodSetDemand(P, 1, 1),))
    # The west's scheduler places it (a node came back, the count is a moment ahead).
    assert moved([trial], {"east": room([8]), "west": room([1])}) == {}
    # No worker has room: it waits where it is, for the worker's timeout or a node.
    assert moved([trial], {"east": room([], [8]), "west": room([])}) == {}
    # The east does not answer; the west does not either (MultiKueue's worker-lost timeout decides).
    assert moved([trial], {"east": None, "west": room([])}) == {}
    assert moved([trial], {"east": room([8]), "west": None}) == {}
    # All its pods placed: nothing to move.
    assert (
        moved(
            [plan.Placed("default/t", "west", (PodSetDemand(P, 1, 1),))],
            {"east": room([8]), "west": room([])},
        )
        == {}
    )
    # PREEMPTIBLE_FIRST takes the west's standard room before it moves.
    flexible = plan.Placed("default/f", "west", (PodSetDemand(F, 1, 8),), (PodSetDemand(F, 1, 8),))
    assert moved([flexible], {"east": room([8]), "west": room([], [8])}) == {}


def test_a_workload_whose_pods_are_taken_off_cordoned_nodes_moves_before_their_replacements_exist() -> None:
    """A preemption: the node cordoned, its pods given SIGTERM (being deleted), the node gone at the latest five
    minutes later. With no room left in the worker, the replacement would only be found unschedulable: the
    workload's lost pods count from the notice on, so it is given back at once (its copy is started elsewhere
    only once these pods are gone: the dispatcher waits for them)."""
    mine = {"jobset.sigs.k8s.io/jobset-name": "llm", PLACEMENT_LABEL: "preemptible"}
    schedulable = {"p2", "s1"}

    def on(node_name: str | None, deleting: bool = False, **status: Any) -> dict[str, Any]:
        found = labelled_pod(f"llm-{node_name}", mine, **status)
        found["spec"]["nodeName"] = node_name
        if deleting:
            found["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return found

    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    # Being deleted on a cordoned node (p1) or one already gone (p9): lost, with nothing to replace them yet.
    assert (
        plan.lost_pods([on("p1", deleting=True), on("p9", deleting=True)], schedulable)
        == (PodSetDemand(P, 1, 4),) * 2
    )
    # Running on a cordoned node (a user's cordon, a repair not yet draining it): not lost.
    assert plan.lost_pods([on("p1")], schedulable) == ()
    # Being deleted on a schedulable node (a pod deleted, a node that stays): not lost to the worker.
    assert plan.lost_pods([on("p2", deleting=True)], schedulable) == ()
    # Its replacement exists, not placed yet: counted once (the replacement), stranded or not.
    assert plan.lost_pods([on("p1", deleting=True), on(None, phase="Pending")], schedulable) == ()
    replaced = [on("p1", deleting=True), on(None, phase="Pending", conditions=[unschedulable])]
    assert plan.lost_pods(replaced, schedulable) == (PodSetDemand(P, 1, 4),)
    # A pod that finished is not lost, wherever it was.
    assert plan.lost_pods([on("p1", deleting=True, phase="Succeeded")], schedulable) == ()


def test_moves_take_the_room_they_go_to() -> None:
    both = [
        plan.Placed(f"default/t{i}", "west", (PodSetDemand(P, 1, 8),), (PodSetDemand(P, 1, 8),))
        for i in range(2)
    ]
    assert moved(both, {"east": room([8]), "west": room([])}) == {"default/t0": "east"}


def labelled_pod(name: str, labels: dict[str, str], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
        "status": status,
    }


def test_a_workloads_pods_in_a_worker_and_those_the_scheduler_found_no_node_for() -> None:
    found = workload(
        clusterName="fleet-west", admissionChecks=[{"name": "fleet", "state": "Ready"}], conditions=RESERVED
    )
    found["metadata"]["ownerReferences"] = [{"kind": "JobSet", "name": "llm", "controller": True}]
    assert plan.runs_in_a_worker(found, "fleet")
    assert not plan.runs_in_a_worker(found, "other")
    assert not plan.runs_in_a_worker(workload(admissionChecks=[{"name": "fleet", "state": "Ready"}]), "fleet")
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    mine = {"jobset.sigs.k8s.io/jobset-name": "llm", PLACEMENT_LABEL: "preemptible"}
    pods = [
        labelled_pod("llm-workers-0", mine, phase="Pending", conditions=[unschedulable]),
        labelled_pod("llm-workers-1", mine, phase="Pending"),  # not tried yet
        labelled_pod(
            "other-0",
            {"jobset.sigs.k8s.io/jobset-name": "other"},
            phase="Pending",
            conditions=[unschedulable],
        ),
    ]
    its_pods = plan.pods_of(found, pods)
    assert [p["metadata"]["name"] for p in its_pods] == ["llm-workers-0", "llm-workers-1"]
    assert [plan.stranded(p) for p in its_pods] == [True, False]
    assert plan.pod_demand(its_pods[0]) == PodSetDemand(P, 1, 4)
    # A plain Job's pods carry its name under the Job controller's label.
    job = workload()
    job["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "eval", "controller": True}]
    assert plan.pods_of(job, [labelled_pod("eval-x", {"batch.kubernetes.io/job-name": "eval"})])


def held_by_admission(found: dict[str, Any], resource_version: str, status_fields: dict[str, Any]) -> None:
    """Give ``found`` the ``resourceVersion`` it was read at and, as Kueue's admission manager holds them on the
    twin (``managedFields``, subresource status), ``status_fields``."""
    found["metadata"].update(
        resourceVersion=resource_version,
        managedFields=[
            {
                "manager": ADMISSION_MANAGER,
                "operation": "Apply",
                "subresource": "status",
                "fieldsV1": {"f:status": status_fields},
            }
        ],
    )


def test_a_workload_is_given_back_as_multikueue_gives_back_one_its_worker_evicted() -> None:
    """The fleet's admission check set to Retry under Kueue's admission manager, every field that manager
    holds kept as it is (the manager's Kueue then evicts it, reason AdmissionCheck, with no requeue backoff)."""
    check = {"name": "fleet", "state": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    found = workload(
        conditions=[{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}],
        admissionChecks=[check],
        clusterName="fleet-west",
    )
    held_by_admission(
        found, "7", {"f:clusterName": {}, "f:conditions": ADMISSION_FIELDS["f:status"]["f:conditions"]}
    )
    body = retry_apply(found, "fleet", "west has no room", "2026-01-01T00:01:00Z", "kueue.x-k8s.io/v1beta2")
    assert body is not None
    assert body["metadata"]["resourceVersion"] == "7"
    assert body["status"]["clusterName"] == "fleet-west"
    assert body["status"]["conditions"] == found["status"]["conditions"]
    assert body["status"]["admissionChecks"] == [
        {
            "name": "fleet",
            "state": "Retry",
            "message": "west has no room",
            "lastTransitionTime": "2026-01-01T00:01:00Z",
        }
    ]
    assert retry_apply(found, "other", "m", "t", "kueue.x-k8s.io/v1beta2") is None


class _Watched:
    """A manager whose watch of workloads yields ``events`` once, then fails as a dropped connection does; from
    its third watch on it blocks, so the watcher thread (a daemon, run for ever) says nothing after the test: a
    watch dropped again and again printed a line each time, into other tests' captured output (a CLI test read
    it as its own ``--json``)."""

    def __init__(self, events: list[dict[str, Any]], wake: threading.Event) -> None:
        self.events, self.wake = events, wake
        self.seen: list[bool] = []
        self.watches = 0

    def watch(self, path: str) -> Iterator[dict[str, Any]]:
        self.watches += 1
        if self.watches > 2:
            threading.Event().wait()  # never set: the daemon thread sleeps until the process ends
        for event in self.events:
            yield event
            self.seen.append(self.wake.is_set())
        raise DispatchRequestError(0, "the watch ended")


def test_a_workload_that_comes_to_await_a_worker_wakes_the_dispatcher_at_once() -> None:
    """Kueue reserving a workload's quota on the manager (a submission, or one given back and requeued) starts
    a pass then, not at the next interval; other changes do not; a watch that drops is started again."""
    pending = [{"name": "fleet", "state": "Pending"}]
    awaiting = workload(conditions=RESERVED, admissionChecks=pending)
    nominated = workload(conditions=RESERVED, admissionChecks=pending, nominatedClusterNames=["fleet-east"])
    events = [
        {"type": "ADDED", "object": workload(admissionChecks=pending)},  # no quota yet
        {"type": "MODIFIED", "object": nominated},  # the dispatcher's own nomination
        {"type": "DELETED", "object": awaiting},
        {"type": "MODIFIED", "object": awaiting},
    ]
    wake = threading.Event()
    manager = _Watched(events, wake)
    watcher = threading.Thread(
        target=dispatch_main.watch_and_wake,
        args=(
            lambda: manager,
            "/w",
            lambda event: dispatch_main.awaits_nomination(event, "fleet"),
            wake,
            0.01,
            "the manager's workloads",
        ),
        daemon=True,
    )
    watcher.start()
    assert wake.wait(10)
    assert manager.seen[:4] == [False, False, False, True]
    # Dropped, the watch is started again: the same events come once more.
    wake.clear()
    assert wake.wait(10)


def test_the_watches_take_each_workers_client_where_the_passes_do(tmp_path: Path) -> None:
    """The watch of a worker's pods gets its client from the dispatcher's ``Workers``, as each pass does (one
    home for how a worker is reached: its kubeconfig read again, a rotated token picked up), not from a
    kubeconfig file of its own: here there is none, and the worker's pod being deleted still wakes a pass."""
    deleting = labelled_pod("llm-0", {"jobset.sigs.k8s.io/jobset-name": "llm"}, phase="Running")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    wake = threading.Event()
    asked: list[str] = []
    west = _Watched([{"type": "MODIFIED", "object": deleting}], wake)

    @dataclasses.dataclass(frozen=True)
    class Workers:
        def client(self, name: str) -> _Watched:
            asked.append(name)
            return west

    settings = dispatch_main.Settings(
        namespace="default",
        admission_check="fleet",
        api_version="kueue.x-k8s.io/v1beta2",
        workers=(dispatch_main.Worker("west", "fleet-west"),),
        interval_seconds=60,
        patience_seconds=30,
    )
    manager = _Watched([], threading.Event())  # the manager's watch: nothing comes
    dispatcher = dispatch_main.Dispatcher(settings, manager, tmp_path / "no-kubeconfigs", workers=Workers())
    dispatch_main.start_watches(dispatcher, wake)
    assert wake.wait(10), "the worker's pod being deleted did not wake a pass"
    assert asked[:1] == ["west"]


def test_a_workers_pod_being_deleted_gone_or_found_no_node_wakes_the_dispatcher() -> None:
    """A preemption's SIGTERM (the pod being deleted), a former copy's last pod gone, a pod the scheduler found
    no node for: each starts a pass at once; a pod created or running does not."""
    mine = {"jobset.sigs.k8s.io/jobset-name": "llm"}
    running = labelled_pod("llm-0", mine, phase="Running")
    deleting = labelled_pod("llm-0", mine, phase="Running")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    unschedulable = labelled_pod(
        "llm-1",
        mine,
        phase="Pending",
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    )
    wakes = dispatch_main.leaves_or_strands
    assert not wakes({"type": "ADDED", "object": running})
    assert not wakes({"type": "MODIFIED", "object": running})
    assert wakes({"type": "MODIFIED", "object": deleting})
    assert wakes({"type": "DELETED", "object": running})
    assert wakes({"type": "MODIFIED", "object": unschedulable})
    assert not wakes({"type": "BOOKMARK", "object": deleting})


# --- reading the API's objects ---------------------------------------------------------------------


def node(
    name: str, gpus: int, preemptible: bool, ready: bool = True, cordoned: bool = False
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {COMPUTE_CLASS_LABEL: PREEMPTIBLE} if preemptible else {}},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(node_name: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "spec": {"nodeName": node_name, "containers": [{"resources": resources}]},
        "status": {"phase": phase},
    }


def test_room_is_counted_per_ready_schedulable_node_less_the_pods_on_it() -> None:
    nodes = [
        node("p1", 8, True),
        node("p2", 8, True, cordoned=True),  # a preemption notice: no room
        node("p3", 8, True, ready=False),
        node("s1", 8, False),
    ]
    pods = [pod("p1", 3), pod("p1", 2, phase="Succeeded"), pod("s1", 8), pod("p2", 1)]
    assert plan.worker_room(nodes, pods) == {P: [5], S: []}


def workload(**status: Any) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {PLACEMENT_LABEL: "preemptible-first"}},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
    }
    return {
        "metadata": {"name": "a", "namespace": "default"},
        "spec": {"podSets": [{"name": "main", "count": 3, "template": template}]},
        "status": status,
    }


RESERVED = [{"type": "QuotaReserved", "status": "True"}]


def test_a_workload_awaits_a_worker_while_multikueue_waits_and_no_worker_runs_it() -> None:
    pending = [{"name": "fleet", "state": "Pending"}]
    assert plan.demands_of(workload()) == (PodSetDemand(F, 3, 2),)
    assert plan.awaits_a_worker(workload(conditions=RESERVED, admissionChecks=pending), "fleet")
    assert not plan.awaits_a_worker(workload(conditions=RESERVED, admissionChecks=pending), "other")
    assert not plan.awaits_a_worker(workload(admissionChecks=pending), "fleet")  # no quota yet
    running = workload(conditions=RESERVED, admissionChecks=pending, clusterName="fleet-east")
    assert not plan.awaits_a_worker(running, "fleet")


EVICTED_ON_MANAGER = {
    "type": "Evicted",
    "status": "True",
    "reason": "DeactivatedDueToEvictedOnManagerCluster",
    "message": "The workload is deactivated due to Evicted on manager: At least one admission check is false",
}
"""The condition MultiKueue v0.17.0 left on the western copy of a sweep's trial that never moved east (CI)."""


def test_a_copy_left_deactivated_in_a_worker_is_found_where_multikueue_would_stop() -> None:
    left = workload(conditions=[EVICTED_ON_MANAGER])
    being_deleted = workload(conditions=[EVICTED_ON_MANAGER])
    being_deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    evicted_by_its_worker = workload(conditions=[{**EVICTED_ON_MANAGER, "reason": "PodsReadyTimeout"}])
    mine = workload(conditions=RESERVED)
    assert plan.left_deactivated(mine, {"west": {"a": left}, "east": {}}) == ["west"]
    assert plan.left_deactivated(mine, {"west": {"a": being_deleted}}) == []  # MultiKueue is removing it
    assert plan.left_deactivated(mine, {"west": {"a": evicted_by_its_worker}}) == []  # MultiKueue moves on
    other = {**mine, "metadata": {"name": "b", "namespace": "default"}}
    assert plan.left_deactivated(other, {"west": {"a": left}}) == []


class _Cluster:
    """An API server's answers to the dispatcher's reads, by path; the applies it was sent."""

    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        self.answers = answers
        self.applied: list[tuple[str, dict[str, Any]]] = []
        self.field_managers: list[str] = []

    def get(self, path: str, params: Any = None) -> dict[str, Any]:
        return self.answers.get(path, {"items": []})

    def apply(self, path: str, body: dict[str, Any], field_manager: str) -> dict[str, Any]:
        self.applied.append((path, body))
        self.field_managers.append(field_manager)
        return body


@dataclasses.dataclass(frozen=True)
class _Workers:
    """The workers' fake API servers by name (``dispatch_main.Workers``)."""

    clusters: Mapping[str, _Cluster]

    def client(self, name: str) -> _Cluster:
        return self.clusters[name]


API = "kueue.x-k8s.io/v1beta2"
WORKLOADS = f"/apis/{API}/namespaces/default/workloads"
"""The fleet's Workloads, on the manager and in each worker (the namespace ``default``)."""


def fleet_manager(*workloads: dict[str, Any]) -> _Cluster:
    """The manager's API server: ``workloads`` in the fleet's namespace, both workers' MultiKueueClusters active."""
    return _Cluster(
        {
            WORKLOADS: {"items": list(workloads)},
            f"/apis/{API}/multikueueclusters/fleet-east": {"status": {"conditions": [ACTIVE]}},
            f"/apis/{API}/multikueueclusters/fleet-west": {"status": {"conditions": [ACTIVE]}},
        }
    )


def east_west_dispatcher(
    manager: _Cluster, workers: Mapping[str, _Cluster], tmp_path: Path
) -> dispatch_main.Dispatcher:
    """A dispatcher of the fleet's admission check ``fleet`` over the workers east and west (in that order)."""
    settings = dispatch_main.Settings(
        namespace="default",
        admission_check="fleet",
        api_version=API,
        workers=(dispatch_main.Worker("east", "fleet-east"), dispatch_main.Worker("west", "fleet-west")),
        interval_seconds=2,
        patience_seconds=30,
    )
    return dispatch_main.Dispatcher(settings, manager, tmp_path, workers=_Workers(workers))


def test_a_workload_multikueue_left_stuck_behind_a_deactivated_copy_is_given_back_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """CI: a trial given back from the west was requeued and reserved again on the manager before MultiKueue
    removed its western copy (deactivated by the manager's eviction); MultiKueue then stopped at that copy on
    every reconcile, never creating the eastern one the dispatcher nominated, and the trial waited for ever. The
    dispatcher gives it back once more (its quota released, MultiKueue removes the copy), after a grace in
    which MultiKueue may be removing it anyway; never while no such copy is left."""
    check = {"name": "fleet", "state": "Pending", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    waiting = workload(conditions=RESERVED, admissionChecks=[check], nominatedClusterNames=["fleet-east"])
    held_by_admission(waiting, "9", {"f:conditions": ADMISSION_FIELDS["f:status"]["f:conditions"]})
    manager = fleet_manager(waiting)
    west = _Cluster({WORKLOADS: {"items": [workload(conditions=[EVICTED_ON_MANAGER])]}})
    clock = [100.0]
    monkeypatch.setattr(dispatch_main.time, "monotonic", lambda: clock[0])
    dispatcher = east_west_dispatcher(manager, {"east": _Cluster({}), "west": west}, tmp_path)

    dispatcher.run_pass()
    assert manager.applied == []  # first seen: MultiKueue may be removing the copy this moment
    clock[0] += dispatch_main.STALE_COPY_GRACE_SECONDS
    dispatcher.run_pass()
    ((target, body),) = manager.applied
    assert target == f"{WORKLOADS}/a/status"
    (given_back,) = body["status"]["admissionChecks"]
    assert given_back["state"] == "Retry" and "west" in given_back["message"]
    # Once the copy is gone the workload waits for its worker as any other: not given back again.
    west.answers[WORKLOADS] = {"items": []}
    clock[0] += 10 * dispatch_main.STALE_COPY_GRACE_SECONDS
    dispatcher.run_pass()
    retries = [
        b
        for _, b in manager.applied
        if any(c["state"] == "Retry" for c in b["status"].get("admissionChecks", []))
    ]
    assert len(retries) == 1


EVICTING = {
    "type": "Evicted",
    "status": "True",
    "reason": "AdmissionCheck",
    "message": "At least one admission check is false",
}
"""The manager's eviction of a workload given back, before Kueue released its quota: Kueue v0.17.0 has already
reset its checks to Pending and cleared its cluster, so it looks as if it awaited a worker."""


def test_a_workload_being_evicted_on_the_manager_is_never_given_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """CI (stop 50): a trial given back from the west was seen, while the manager's eviction had not yet released
    its quota, as awaiting a worker with its western copy left deactivated, and after the grace the dispatcher
    gave it back again. A check set to Retry while Evicted is True is one Kueue v0.17.0 never resets
    (kubernetes-sigs/kueue#3543): the quota released, its scheduler skipped the trial ("The workload has failed
    admission checks") and its workload controller, seeing it evicted, did nothing, for ever. The dispatcher may
    still send such a workload to a worker (how it runs again when its worker stopped answering), never give it
    back; once Kueue reserves it again it is given back as before."""
    check = {"name": "fleet", "state": "Pending", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    evicting = workload(conditions=[*RESERVED, EVICTING], admissionChecks=[check])
    held_by_admission(evicting, "9", {"f:conditions": ADMISSION_FIELDS["f:status"]["f:conditions"]})
    manager = fleet_manager(evicting)
    west = _Cluster({WORKLOADS: {"items": [workload(conditions=[EVICTED_ON_MANAGER])]}})
    clock = [100.0]
    monkeypatch.setattr(dispatch_main.time, "monotonic", lambda: clock[0])
    dispatcher = east_west_dispatcher(manager, {"east": _Cluster({}), "west": west}, tmp_path)

    def retries() -> list[dict[str, Any]]:
        return [
            b
            for _, b in manager.applied
            if any(c["state"] == "Retry" for c in b["status"].get("admissionChecks", []))
        ]

    assert retry_apply(evicting, "fleet", "moving", "2026-01-01T00:00:01Z", API) is None
    for _ in range(3):
        dispatcher.run_pass()
        clock[0] += 10 * dispatch_main.STALE_COPY_GRACE_SECONDS
    assert retries() == []
    # Kueue reserved it again (Evicted False) before MultiKueue removed the copy: given back as before.
    reserved = workload(
        conditions=[*RESERVED, {**EVICTING, "status": "False", "reason": "QuotaReserved"}],
        admissionChecks=[check],
    )
    held_by_admission(reserved, "12", {"f:conditions": ADMISSION_FIELDS["f:status"]["f:conditions"]})
    manager.answers[WORKLOADS] = {"items": [reserved]}
    dispatcher.run_pass()  # the copy has been seen left deactivated for longer than the grace
    assert len(retries()) == 1


MOVED = {"evictions": [{"reason": "AdmissionCheck", "underlyingCause": "", "count": 1}]}
"""``schedulingStats`` of a workload the manager's Kueue evicted once: a failover."""


def copy_of(version: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    """A worker's copy of the workload ``a`` at ``resourceVersion`` ``version``."""
    found = workload(conditions=list(conditions))
    found["metadata"]["resourceVersion"] = version
    return found


def test_multikueue_is_prompted_at_each_change_of_a_moved_workloads_copy_it_must_act_on() -> None:
    """Measured on the twin (a failover, 4.3 s in all): MultiKueue v0.17.0 handles a worker's change one second
    late, twice per failover. The former worker's copy released its quota at 0.8 s, the manager released its own
    at 1.7 s; the next worker's copy was admitted at 1.8 s, MultiKueue marked the workload admitted and created
    its job there at 2.9 s. Those two changes are prompted, for a workload moved before only."""
    worker_of = {"fleet-east": "east", "fleet-west": "west"}
    check = [{"name": "fleet", "state": "Pending"}]
    released = {"type": "QuotaReserved", "status": "False", "reason": "Pending"}
    admitted = [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]
    evicting = workload(conditions=[*RESERVED, EVICTING], admissionChecks=check, schedulingStats=MOVED)
    # The manager evicts it: nothing to say while its western copy still holds the quota there.
    assert plan.prompt_for(evicting, {"west": {"a": copy_of("7", *admitted)}}, worker_of) is None
    found = plan.prompt_for(evicting, {"west": {"a": copy_of("8", released)}, "east": {}}, worker_of)
    assert found == plan.Prompt("west", plan.COPY_RELEASED, "8")
    # Requeued and reserved again, sent east: prompted once its eastern copy is admitted, not before.
    again = {**EVICTING, "status": "False", "reason": "QuotaReserved"}
    waiting = workload(
        conditions=[*RESERVED, again],
        admissionChecks=check,
        schedulingStats=MOVED,
        nominatedClusterNames=["fleet-east"],
    )
    assert plan.prompt_for(waiting, {"east": {"a": copy_of("3")}}, worker_of) is None
    found = plan.prompt_for(waiting, {"east": {"a": copy_of("4", *admitted)}}, worker_of)
    assert found == plan.Prompt("east", plan.COPY_ADMITTED, "4")
    # A copy admitted in a worker it is not sent to, a first admission, a workload already running: none.
    assert plan.prompt_for(waiting, {"west": {"a": copy_of("4", *admitted)}}, worker_of) is None
    first = {**waiting, "status": {k: v for k, v in waiting["status"].items() if k != "schedulingStats"}}
    assert plan.prompt_for(first, {"east": {"a": copy_of("4", *admitted)}}, worker_of) is None
    running = {**waiting, "status": {**waiting["status"], "clusterName": "fleet-east"}}
    assert plan.prompt_for(running, {"east": {"a": copy_of("4", *admitted)}}, worker_of) is None


def test_a_prompt_is_the_dispatchers_own_condition_written_once_per_change(tmp_path: Path) -> None:
    """The prompt changes the manager's Workload (MultiKueue then reconciles it at once) through a condition of
    the dispatcher's own, under its own field manager, never Kueue's fields; one per change of the copy, and a
    change of a moved workload's copy in a worker wakes a pass."""
    check = {"name": "fleet", "state": "Pending", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    waiting = workload(
        conditions=[*RESERVED, {**EVICTING, "status": "False", "reason": "QuotaReserved"}],
        admissionChecks=[check],
        schedulingStats=MOVED,
        nominatedClusterNames=["fleet-east"],
    )
    held_by_admission(waiting, "20", {"f:conditions": ADMISSION_FIELDS["f:status"]["f:conditions"]})
    manager = fleet_manager(waiting)
    admitted = [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]
    east = _Cluster({WORKLOADS: {"items": [copy_of("4", *admitted)]}})
    dispatcher = east_west_dispatcher(manager, {"east": east, "west": _Cluster({})}, tmp_path)
    dispatcher.run_pass()
    dispatcher.run_pass()  # the same copy: not prompted again
    ((target, body),) = manager.applied
    (field_manager,) = manager.field_managers
    assert target == f"{WORKLOADS}/a/status" and field_manager == PROMPT_MANAGER != ADMISSION_MANAGER
    assert "resourceVersion" not in body["metadata"] and set(body["status"]) == {"conditions"}
    (condition,) = body["status"]["conditions"]
    assert condition["type"] == PROMPT_CONDITION and condition["reason"] == plan.COPY_ADMITTED
    assert "east" in condition["message"] and condition["status"] == "True"
    east.answers[WORKLOADS] = {"items": [copy_of("5", *admitted)]}
    dispatcher.run_pass()
    assert len(manager.applied) == 2  # a change of the copy: prompted again
    assert dispatch_main.concerns_a_move({"type": "MODIFIED", "object": copy_of("6")}, dispatcher.moving)
    other = copy_of("6")
    other["metadata"]["name"] = "b"
    assert not dispatch_main.concerns_a_move({"type": "MODIFIED", "object": other}, dispatcher.moving)


ACTIVE = {"type": "Active", "status": "True"}


ADMISSION_FIELDS = {
    "f:status": {
        "f:admission": {
            "f:clusterQueue": {},
            "f:podSetAssignments": {
                'k:{"name":"main"}': {
                    ".": {},
                    "f:count": {},
                    "f:flavors": {"f:nvidia.com/gpu": {}},
                    "f:name": {},
                }
            },
        },
        "f:conditions": {
            'k:{"type":"QuotaReserved"}': {".": {}, "f:reason": {}, "f:status": {}, "f:type": {}},
        },
    }
}
"""What Kueue v0.17.0's admission held of a reserved workload's status on the twin (its ``managedFields``)."""


def test_the_worker_is_written_as_kueues_admission_writes_it_with_all_that_manager_holds() -> None:
    """So that MultiKueue's own apply clears the list when a worker admits the workload: Kueue keeps
    clusterName and nominatedClusterNames exclusive, and an apply clears only what its manager holds."""
    admission = {
        "clusterQueue": "fleet",
        "podSetAssignments": [{"name": "main", "count": 3, "flavors": {"nvidia.com/gpu": "p"}}],
    }
    reserved = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}
    podsready = {"type": "PodsReady", "status": "False", "reason": "WaitForStart"}
    found = workload(
        conditions=[reserved, podsready], admission=admission, admissionChecks=[{"name": "fleet"}]
    )
    found["metadata"].update(
        resourceVersion="42",
        managedFields=[
            {
                "manager": "kueue",
                "operation": "Update",
                "subresource": "status",
                "fieldsV1": {"f:status": {}},
            },
            {
                "manager": ADMISSION_MANAGER,
                "operation": "Apply",
                "subresource": "status",
                "fieldsV1": ADMISSION_FIELDS,
            },
        ],
    )
    body = nomination_apply(found, ["fleet-west"], "kueue.x-k8s.io/v1beta2")
    assert body == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "a", "namespace": "default", "resourceVersion": "42"},
        "status": {
            "admission": admission,  # every field that manager holds, as it is: none removed
            "conditions": [reserved],  # not PodsReady: another manager's
            "nominatedClusterNames": ["fleet-west"],
        },
    }
    # A workload Kueue's admission has not written yet (no quota reserved) is not nominated.
    assert nomination_apply(workload(), ["fleet-west"], "kueue.x-k8s.io/v1beta2") is None


# --- its objects -----------------------------------------------------------------------------------


def objects() -> dict[str, dict[str, Any]]:
    found = builder.manager_dispatch_objects(
        "fleet",
        "default",
        "kueue-system",
        [("east", "fleet-east"), ("west", "fleet-west")],
        FleetDispatchArgs(),
    )
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in found}


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def test_the_manager_kueue_dispatches_externally_when_the_fleet_has_a_dispatcher() -> None:
    assert fleet_queue.multikueue_settings(300, dispatched=True) == {
        "workerLostTimeout": "300s",
        "dispatcherName": builder.DISPATCHER_NAME,
    }
    assert "dispatcherName" not in fleet_queue.multikueue_settings(300)
    assert builder.DISPATCHER_NAME not in (
        "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
        "kueue.x-k8s.io/multikueue-dispatcher-incremental",
    )


def test_the_dispatcher_is_granted_only_what_it_does() -> None:
    found = objects()
    assert granted(found["Role/fleet-dispatcher"]["rules"]) == {
        ("kueue.x-k8s.io", "workloads", "get"),
        ("kueue.x-k8s.io", "workloads", "list"),
        ("kueue.x-k8s.io", "workloads", "watch"),
        ("kueue.x-k8s.io", "workloads/status", "patch"),
    }
    (cluster_rule,) = found["ClusterRole/fleet-dispatcher"]["rules"]
    assert cluster_rule["resourceNames"] == ["fleet-east", "fleet-west"] and cluster_rule["verbs"] == ["get"]
    readers = {f"{o['kind']}": o for o in builder.worker_reader_objects("fleet", "kueue-system")}
    assert granted(readers["ClusterRole"]["rules"]) == {
        ("", "nodes", "list"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("kueue.x-k8s.io", "workloads", "list"),
        ("kueue.x-k8s.io", "workloads", "watch"),
    }
    assert readers["Secret"]["type"] == "kubernetes.io/service-account-token"


def test_the_dispatcher_runs_one_pod_on_a_standard_node_as_nobody() -> None:
    deployment = objects()["Deployment/fleet-dispatcher"]["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}
    spec = deployment["template"]["spec"]
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        {"key": COMPUTE_CLASS_LABEL, "operator": "NotIn", "values": [PREEMPTIBLE]}
    ]
    assert spec["securityContext"]["runAsNonRoot"] is True
    (container,) = spec["containers"]
    assert container["image"] == "python:3.12-slim"
    assert container["command"][:3] == ["python", "-m", "together_clusters.components.fleet_dispatch"]


def test_a_change_of_configuration_rolls_the_dispatchers_pod() -> None:
    def digest(dispatch: FleetDispatchArgs) -> str:
        (deployment,) = [
            o
            for o in builder.manager_dispatch_objects(
                "fleet", "default", "kueue-system", [("east", "fleet-east")], dispatch
            )
            if o["kind"] == "Deployment"
        ]
        return str(deployment["spec"]["template"]["metadata"]["annotations"][builder.CONFIG_HASH_ANNOTATION])

    assert digest(FleetDispatchArgs()) == digest(FleetDispatchArgs())
    assert digest(FleetDispatchArgs()) != digest(FleetDispatchArgs(patience_seconds=60))


def test_the_dispatchers_code_runs_on_a_bare_interpreter_with_only_its_configmap(tmp_path: Path) -> None:
    """The ConfigMap's files, laid out as the pod's volume lays them out, on an interpreter without site
    packages (-S): everything it imports is the standard library or in the ConfigMap."""
    found = objects()
    config_map = found["ConfigMap/fleet-dispatcher"]["data"]
    volumes = {
        v["name"]: v for v in found["Deployment/fleet-dispatcher"]["spec"]["template"]["spec"]["volumes"]
    }
    for item in volumes["code"]["configMap"]["items"]:
        target = tmp_path / "code" / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(config_map[item["key"]])
    (tmp_path / "config.json").write_text(config_map[builder.CONFIG_KEY])
    (tmp_path / "workers").mkdir()
    account = tmp_path / "account"
    account.mkdir()
    probe = (
        "import sys, json; from together_clusters.components.fleet_dispatch import __main__ as m, plan; "
        "s = m.Settings.from_json(open(sys.argv[1]).read()); "
        "print(json.dumps([s.admission_check, [w.cluster for w in s.workers], s.interval_seconds, plan.__file__]))"
    )
    ran = subprocess.run(
        [sys.executable, "-S", "-c", probe, str(tmp_path / "config.json")],
        env={"PYTHONPATH": str(tmp_path / "code")},
        cwd=tmp_path,  # not the checkout, whose together_clusters/ would be found on '' (the current folder)
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    check, clusters, interval, origin = json.loads(ran.stdout)
    assert (check, clusters, interval) == ("fleet", ["fleet-east", "fleet-west"], 2)
    assert origin.startswith(str(tmp_path / "code"))
    # Outside a pod it says so on one line and exits non-zero.
    outside = subprocess.run(
        [
            sys.executable,
            "-S",
            "-m",
            builder.MODULE,
            "--config",
            str(tmp_path / "config.json"),
            "--workers-dir",
            str(tmp_path / "workers"),
            "--service-account-dir",
            str(account),
        ],
        env={"PYTHONPATH": str(tmp_path / "code")},
        cwd=tmp_path,  # not the checkout, whose together_clusters/ would be found on '' (the current folder)
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert outside.returncode == 2 and "KUBERNETES_SERVICE_HOST" in outside.stdout


@pytest.mark.parametrize(
    ("dispatch", "field"),
    [
        (FleetDispatchArgs(interval_seconds=0), "dispatch.interval_seconds"),
        (FleetDispatchArgs(patience_seconds=-1), "dispatch.patience_seconds"),
        (FleetDispatchArgs(image=" "), "dispatch.image"),
    ],
)
def test_bad_dispatch_settings_are_refused_naming_the_field(dispatch: FleetDispatchArgs, field: str) -> None:
    found = fleet_queue.fleet_violations(
        "fleet", FleetQueueArgs(workers=["x"], dispatch=dispatch), [fleet_queue.WorkerView("east", 1)]
    )
    assert [v.field for v in found] == [field]


def test_the_dispatchers_objects_are_valid_kubernetes_objects() -> None:
    """Strictly, against the Kubernetes OpenAPI schemas the package ships (no unknown or misspelt field)."""
    for manifest in [*objects().values(), *builder.worker_reader_objects("fleet", "kueue-system")]:
        assert_schema_valid(manifest)
