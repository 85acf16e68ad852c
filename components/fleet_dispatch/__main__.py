"""``python -m together_clusters.components.fleet_dispatch --config FILE --workers-dir DIR
--service-account-dir DIR``: the dispatcher's passes, on the manager (see :mod:`.plan` for the decisions).

Each pass reads the manager's workloads of the fleet's namespace and, for every worker whose
``MultiKueueCluster`` is active, its nodes and pods; and sends each waiting workload to its worker by setting
``status.nominatedClusterNames`` (an apply that carries the workload's ``resourceVersion``, so a workload Kueue
changed in between is left to the next pass; see :mod:`.nomination`). A worker it cannot read is treated as
one that does not answer. Passes run every ``interval_seconds``, and at once when a workload comes to await a
worker, or a worker's pod is being deleted, gone or found no node (watches: :func:`start_watches`). A waiting
workload whose former copy MultiKueue left deactivated in a worker is given back again
(:func:`.plan.left_deactivated` says why). While a workload is moved, each change of its copy in a worker that
MultiKueue must act on (and would see a second late) is prompted by a condition of the dispatcher's own on the
manager's Workload (:func:`.plan.prompt_for`); those copies are watched too. It prints a line per decision and
per change of a worker's state, never a credential.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from together_clusters.errors import DispatchRequestError
from together_clusters.platform.objects import condition_true

from . import plan
from .kube import KubeClient
from .nomination import ADMISSION_MANAGER, PROMPT_MANAGER, nomination_apply, prompt_apply, retry_apply


@dataclass(frozen=True)
class Worker:
    """A worker: its name in the fleet and its ``MultiKueueCluster`` (the name MultiKueue nominates)."""

    name: str
    cluster: str


@dataclass(frozen=True)
class Settings:
    """The dispatcher's configuration (the ConfigMap's ``config.json``, written by the FleetQueue)."""

    namespace: str
    admission_check: str
    api_version: str
    workers: tuple[Worker, ...]
    interval_seconds: float
    patience_seconds: float

    @classmethod
    def from_json(cls, text: str) -> Settings:
        raw = json.loads(text)
        return cls(
            namespace=raw["namespace"],
            admission_check=raw["admission_check"],
            api_version=raw["api_version"],
            workers=tuple(Worker(w["name"], w["cluster"]) for w in raw["workers"]),
            interval_seconds=float(raw["interval_seconds"]),
            patience_seconds=float(raw["patience_seconds"]),
        )


STALE_COPY_GRACE_SECONDS = 2.0
"""How long a workload that awaits a worker may be seen with a copy MultiKueue left deactivated in a worker
(:func:`.plan.left_deactivated`) before it is given back again: MultiKueue may be removing the copy that moment."""

MIN_GAP_SECONDS = 0.2
"""The least time between two passes: a burst of submissions that each wake the dispatcher is one pass or a few,
not one per workload."""


def say(message: str) -> None:
    print(f"fleet-dispatch: {message}", flush=True)


def workload_key(workload: Mapping[str, Any]) -> str:
    """How the dispatcher names a workload, in its state and its lines: ``namespace/name``."""
    return f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"


class Reads(Protocol):
    """What a pass needs of a worker's client (:meth:`.kube.KubeClient.get`)."""

    def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]: ...


class Watches(Protocol):
    """What :func:`watch_and_wake` needs of a client (:meth:`.kube.KubeClient.watch`)."""

    def watch(self, path: str) -> Iterator[dict[str, Any]]: ...


class WorkerClient(Reads, Watches, Protocol):
    """A worker's client: what a pass reads with and what a watch of its pods streams from."""


class Workers(Protocol):
    """Where a pass, and a watch at each (re)start, get each worker's client, by the worker's name."""

    def client(self, name: str) -> WorkerClient: ...


@dataclass(frozen=True)
class WorkerKubeconfigs:
    """Each worker's client from its kubeconfig in ``directory`` (a file per worker, named after it), read
    again at each pass and at each (re)start of a watch: a rotated token is picked up."""

    directory: Path

    def client(self, name: str) -> KubeClient:
        return KubeClient.from_kubeconfig((self.directory / name).read_text())


class Dispatcher:
    """The passes' state: when each workload was first seen with its current worker, each worker's last state.

    ``workers`` gives each worker's client (by default from its kubeconfig in ``workers_dir``)."""

    def __init__(
        self,
        settings: Settings,
        manager: KubeClient,
        workers_dir: Path,
        workers: Workers | None = None,
    ) -> None:
        self.settings = settings
        self.manager = manager
        self.workers: Workers = workers or WorkerKubeconfigs(workers_dir)
        self.held_since: dict[str, tuple[str | None, float]] = {}
        self.answering: dict[str, bool] = {}
        self.unreadable: set[str] = set()
        self.pods: dict[str, list[Mapping[str, Any]]] = {}
        """The unfinished pods (and the Failed ones being deleted) of each worker that answered this pass."""
        self.schedulable: dict[str, set[str]] = {}
        """The nodes that take new pods, of each worker that answered this pass."""
        self.waiting_for_copy: set[str] = set()
        self.copies: dict[str, dict[str, Mapping[str, Any]]] = {}
        """The fleet's Workloads in each worker that answered this pass, by name (MultiKueue's copies)."""
        self.stale_since: dict[str, float] = {}
        """When each waiting workload was first seen with a copy left deactivated in a worker."""
        self.prompted: dict[str, str] = {}
        """The ``resourceVersion`` of the worker's copy each workload being moved was last prompted for."""
        self.moving: frozenset[str] = frozenset()
        """The names of the workloads being moved (:func:`.plan.moved_before`, awaiting a worker or being
        evicted): a change of their copy in a worker wakes a pass (:func:`concerns_a_move`)."""

    def workloads_path(self) -> str:
        return f"/apis/{self.settings.api_version}/namespaces/{self.settings.namespace}/workloads"

    def _room_of(self, worker: Worker) -> plan.Room | None:
        """The worker's room, or None when MultiKueue sees it inactive or it does not answer the dispatcher."""
        problem = ""
        room: plan.Room | None = None
        try:
            cluster = self.manager.get(
                f"/apis/{self.settings.api_version}/multikueueclusters/{worker.cluster}"
            )
            if not condition_true(cluster, "Active"):
                problem = "its MultiKueueCluster is not active"
            else:
                client = self.workers.client(worker.name)
                # resourceVersion 0: served from the API server's cache, as an informer's first list is.
                nodes = client.get("/api/v1/nodes", {"resourceVersion": "0"}).get("items") or []
                listed = client.get(
                    "/api/v1/pods", {"fieldSelector": "status.phase!=Succeeded", "resourceVersion": "0"}
                )
                # A Failed pod being deleted is kept: one taken off a cordoned node whose process has already
                # exited (plan.displaced), or a former copy's pod not yet gone (a move waits for it).
                pods = [
                    pod
                    for pod in listed.get("items") or []
                    if (pod.get("status") or {}).get("phase") != "Failed"
                    or (pod.get("metadata") or {}).get("deletionTimestamp")
                ]
                copies = client.get(self.workloads_path(), {"resourceVersion": "0"}).get("items") or []
                room = plan.worker_room(nodes, pods)
                self.pods[worker.name] = pods
                self.copies[worker.name] = {str(c["metadata"]["name"]): c for c in copies}
                self.schedulable[worker.name] = plan.schedulable_nodes(nodes)
        except (DispatchRequestError, OSError, KeyError, ValueError) as error:
            problem = str(error)
        answering = room is not None
        if self.answering.get(worker.name) != answering:
            free = sum((room or {}).get(plan.ComputeClass.PREEMPTIBLE, []))
            state = f"answers ({free} free preemptible GPUs)" if answering else f"does not answer: {problem}"
            say(f"worker {worker.name} {state}")
            self.answering[worker.name] = answering
        return room

    def _nominate(self, workload: Mapping[str, Any], cluster: str) -> bool:
        """Set the workload's worker (see :mod:`.nomination`); False when it changed since it was read."""
        body = nomination_apply(workload, [cluster], self.settings.api_version)
        return self._apply_status(workload, body, "set its worker")

    def _give_back(self, workload: Mapping[str, Any], why: str) -> bool:
        """Set the fleet's admission check of ``workload`` to ``Retry``, as MultiKueue does when the worker
        evicts it (see :func:`.nomination.retry_apply`); False when it changed since."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        message = f"fleet dispatcher: {why}"
        body = retry_apply(workload, self.settings.admission_check, message, now, self.settings.api_version)
        return self._apply_status(workload, body, "give it back")

    def _apply_status(self, workload: Mapping[str, Any], body: dict[str, Any] | None, what: str) -> bool:
        """Apply ``body`` to the workload's status as Kueue's admission manager; False when there is nothing to
        apply or Kueue changed the workload since it was read (409: the next pass sees it anew)."""
        if body is None:
            return False
        try:
            path = f"{self.workloads_path()}/{workload['metadata']['name']}/status"
            self.manager.apply(path, body, ADMISSION_MANAGER)
            return True
        except DispatchRequestError as error:
            if error.status != 409:
                say(f"workload {workload_key(workload)}: could not {what}: {error}")
            return False

    def _move_stranded(
        self,
        running: list[Mapping[str, Any]],
        rooms: Mapping[str, plan.Room | None],
        by_cluster: Mapping[str, str],
    ) -> None:
        """Give back each workload whose worker lost the room for some of its pods (:func:`.plan.lost_pods`:
        from the preemption notice on) while another worker has room for it (:func:`.plan.moves`), without
        waiting for the worker's PodsReady timeout."""
        placed: list[plan.Placed] = []
        objects: dict[str, Mapping[str, Any]] = {}
        for workload in running:
            worker = by_cluster.get(str((workload.get("status") or {}).get("clusterName")))
            if worker is None or worker not in self.pods:
                continue
            key = workload_key(workload)
            try:
                demands = plan.demands_of(workload)
            except ValueError:
                continue
            its_pods = plan.pods_of(workload, self.pods[worker])
            lost = plan.lost_pods(its_pods, self.schedulable.get(worker, set()))
            placed.append(plan.Placed(key, worker, demands, lost))
            objects[key] = workload
        workers = [w.name for w in self.settings.workers]
        for key, decision in plan.moves(placed, workers, rooms).items():
            if self._give_back(objects[key], f"{decision.reason}; moving to {decision.worker}"):
                say(f"workload {key} given back ({decision.reason}; {_free(rooms)})")

    def _prompt_multikueue(self, waiting: list[Mapping[str, Any]], worker_of: Mapping[str, str]) -> None:
        """Prompt MultiKueue, for each workload being moved, at each change of a worker's copy it must act on
        (:func:`.plan.prompt_for`: it would see it a second late), by a change of the manager's Workload."""
        self.moving = frozenset(str(w["metadata"]["name"]) for w in waiting if plan.moved_before(w))
        keys = set()
        for workload in waiting:
            key = workload_key(workload)
            keys.add(key)
            prompt = plan.prompt_for(workload, self.copies, worker_of)
            if prompt is None or self.prompted.get(key) == prompt.copy_version:
                continue
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            body = prompt_apply(workload, prompt, now, self.settings.api_version)
            try:
                path = f"{self.workloads_path()}/{workload['metadata']['name']}/status"
                self.manager.apply(path, body, PROMPT_MANAGER)
                self.prompted[key] = prompt.copy_version
                say(f"workload {key}: MultiKueue prompted ({body['status']['conditions'][0]['message']})")
            except DispatchRequestError as error:
                say(f"workload {key}: could not prompt MultiKueue: {error}")
        self.prompted = {k: v for k, v in self.prompted.items() if k in keys}

    def _requeue_if_stuck(self, workload: Mapping[str, Any], key: str, now: float) -> bool:
        """Whether ``workload``, awaiting a worker, has a copy MultiKueue left deactivated in a worker
        (:func:`.plan.left_deactivated`: MultiKueue then creates no copy anywhere else). Seen so for
        :data:`STALE_COPY_GRACE_SECONDS`, it is given back again: while its quota is released MultiKueue
        removes the copy, and the workload then waits for a worker as any other."""
        stuck_in = plan.left_deactivated(workload, self.copies)
        if not stuck_in:
            self.stale_since.pop(key, None)
            return False
        since = self.stale_since.setdefault(key, now)
        if now - since >= STALE_COPY_GRACE_SECONDS:
            why = f"its former copy in {', '.join(stuck_in)} is left deactivated; requeued so MultiKueue removes it"
            if self._give_back(workload, why):
                say(f"workload {key} given back ({why})")
                self.stale_since[key] = now
        return True

    def run_pass(self) -> None:
        settings = self.settings
        workloads = self.manager.get(self.workloads_path()).get("items") or []
        waiting = [w for w in workloads if plan.awaits_a_worker(w, settings.admission_check)]
        running = [w for w in workloads if plan.runs_in_a_worker(w, settings.admission_check)]
        if not waiting and not running:
            self.held_since.clear()
            self.moving = frozenset()
            return
        self.pods, self.schedulable, self.copies = {}, {}, {}
        rooms = {worker.name: self._room_of(worker) for worker in settings.workers}
        by_cluster = {worker.cluster: worker.name for worker in settings.workers}
        self._move_stranded(running, rooms, by_cluster)
        self._prompt_multikueue(waiting, by_cluster)
        now = time.monotonic()
        pending: list[plan.Pending] = []
        objects: dict[str, Mapping[str, Any]] = {}
        waiting.sort(
            key=lambda w: (
                -int((w.get("spec") or {}).get("priority") or 0),
                w["metadata"].get("creationTimestamp", ""),
                w["metadata"]["name"],
            )
        )
        for workload in waiting:
            key = workload_key(workload)
            nominated_clusters = (workload.get("status") or {}).get("nominatedClusterNames") or []
            nominated = by_cluster.get(nominated_clusters[0]) if nominated_clusters else None
            if self._requeue_if_stuck(workload, key, now):
                continue
            if any(plan.pods_of(workload, pods) for pods in self.pods.values()):
                # A copy it had in a worker is still there (MultiKueue removes it): never two copies at once.
                if key not in self.waiting_for_copy:
                    say(f"workload {key}: waits until its former copy's pods are gone")
                    self.waiting_for_copy.add(key)
                continue
            self.waiting_for_copy.discard(key)
            seen_with, since = self.held_since.get(key, (None, now))
            if seen_with != nominated:
                since = now
            self.held_since[key] = (nominated, since)
            objects[key] = workload
            try:
                demands = plan.demands_of(workload)
            except ValueError as error:
                if key not in self.unreadable:  # said once, not at every pass
                    say(f"workload {key}: {error}; left to wait")
                    self.unreadable.add(key)
                continue
            pending.append(plan.Pending(key, demands, nominated, now - since))
        self.held_since = {k: v for k, v in self.held_since.items() if k in objects}
        waiting_keys = {workload_key(w) for w in waiting}
        self.stale_since = {k: v for k, v in self.stale_since.items() if k in waiting_keys}
        clusters = {worker.name: worker.cluster for worker in settings.workers}
        workers = [w.name for w in settings.workers]
        decisions = plan.nominations(pending, workers, rooms, settings.patience_seconds)
        for key, decision in decisions.items():
            if self._nominate(objects[key], clusters[decision.worker]):
                self.held_since[key] = (decision.worker, now)
                say(f"workload {key} -> {decision.worker} ({decision.reason}; {_free(rooms)})")


def awaits_nomination(event: Mapping[str, Any], admission_check: str) -> bool:
    """Whether a watch event of the manager's workloads is one that comes to await a worker with none
    nominated: Kueue reserved its quota, on a submission or after a give-back's requeue."""
    found = event.get("object") or {}
    return (
        event.get("type") in ("ADDED", "MODIFIED")
        and plan.awaits_a_worker(found, admission_check)
        and not (found.get("status") or {}).get("nominatedClusterNames")
    )


def leaves_or_strands(event: Mapping[str, Any]) -> bool:
    """Whether a watch event of a worker's pods is one a pass may act on: a pod being deleted (a preemption's
    SIGTERM, a repair's drain: :func:`.plan.displaced` once its node is cordoned), gone (a former copy's last
    pod, which a move waits for), or found no node (:func:`.plan.stranded`)."""
    found = event.get("object") or {}
    return event.get("type") == "DELETED" or (
        event.get("type") in ("ADDED", "MODIFIED")
        and (bool((found.get("metadata") or {}).get("deletionTimestamp")) or plan.stranded(found))
    )


def concerns_a_move(event: Mapping[str, Any], moving: frozenset[str]) -> bool:
    """Whether a watch event of a worker's Workloads is one of a copy of a workload being moved (``moving``,
    by name: MultiKueue names each copy as the manager's Workload)."""
    found = event.get("object") or {}
    return str((found.get("metadata") or {}).get("name")) in moving


def watch_and_wake(
    connect: Callable[[], Watches],
    path: str,
    wakes: Callable[[Mapping[str, Any]], bool],
    wake: threading.Event,
    retry_seconds: float,
    what: str,
) -> None:
    """Set ``wake`` at each event of the watch of ``path`` that ``wakes``, so the pass that acts on it runs
    then rather than at the next interval (half of one on average; a failover meets three: the notice, the
    former copy gone, the requeue). The interval's passes stay as the net for what no watch shows. Runs
    for ever in a daemon thread; a watch that ends or fails is started again after ``retry_seconds`` with
    a client from ``connect`` (a worker's kubeconfig read again), the interval's passes going on meanwhile."""
    failing = False
    while True:
        try:
            for event in connect().watch(path):
                failing = False
                if wakes(event):
                    wake.set()
        except (DispatchRequestError, OSError, KeyError, ValueError) as error:
            if not failing:  # said once per failure, not at every retry
                say(f"watching {what}: {error}; passes every interval meanwhile")
                failing = True
        time.sleep(retry_seconds)


def start_watches(dispatcher: Dispatcher, wake: threading.Event) -> None:
    """The manager's workloads (:func:`awaits_nomination`), each worker's pods (:func:`leaves_or_strands`) and
    each worker's copies of the workloads being moved (:func:`concerns_a_move`)."""
    settings = dispatcher.settings

    def watched(
        target: Callable[[], Watches], path: str, wakes: Callable[[Mapping[str, Any]], bool], what: str
    ) -> None:
        threading.Thread(
            target=watch_and_wake,
            args=(target, path, wakes, wake, settings.interval_seconds, what),
            daemon=True,
        ).start()

    watched(
        lambda: dispatcher.manager,
        dispatcher.workloads_path(),
        lambda event: awaits_nomination(event, settings.admission_check),
        "the manager's workloads",
    )
    for worker in settings.workers:
        watched(
            functools.partial(dispatcher.workers.client, worker.name),
            "/api/v1/pods",
            leaves_or_strands,
            f"worker {worker.name}'s pods",
        )
        watched(
            functools.partial(dispatcher.workers.client, worker.name),
            dispatcher.workloads_path(),
            lambda event: concerns_a_move(event, dispatcher.moving),
            f"worker {worker.name}'s workloads",
        )


def _free(rooms: Mapping[str, plan.Room | None]) -> str:
    """Each worker's free GPUs by class, as the pass saw them."""
    shown = []
    for worker, room in rooms.items():
        if room is None:
            shown.append(f"{worker}: not answering")
        else:
            classes = ", ".join(f"{sum(free)} {compute_class}" for compute_class, free in room.items())
            shown.append(f"{worker}: {classes}")
    return "free GPUs " + "; ".join(shown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fleet_dispatch", description=__doc__)
    parser.add_argument("--config", type=Path, required=True, help="the dispatcher's config.json")
    parser.add_argument("--workers-dir", type=Path, required=True, help="one token kubeconfig per worker")
    parser.add_argument(
        "--service-account-dir",
        type=Path,
        default=Path("/var/run/secrets/kubernetes.io/serviceaccount"),
        help="the pod's ServiceAccount token and CA",
    )
    parser.add_argument("--once", action="store_true", help="run one pass and exit")
    args = parser.parse_args(argv)
    settings = Settings.from_json(args.config.read_text())
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        say("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: run it in a pod")
        return 2
    manager = KubeClient.in_cluster(host, port, args.service_account_dir)
    dispatcher = Dispatcher(settings, manager, args.workers_dir)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    names = ", ".join(w.name for w in settings.workers)
    say(
        f"dispatching the workloads of {settings.namespace} pending on {settings.admission_check!r} to {names}"
    )
    wake = threading.Event()
    if not args.once:
        start_watches(dispatcher, wake)
    while True:
        try:
            dispatcher.run_pass()
        except DispatchRequestError as error:
            say(f"the manager's API server: {error}")
        if args.once:
            return 0
        # A change that came during the pass wakes the next one at once (after the gap): the pass read the
        # manager before it, perhaps not after.
        time.sleep(MIN_GAP_SECONDS)
        wake.wait(max(settings.interval_seconds - MIN_GAP_SECONDS, 0))
        wake.clear()


if __name__ == "__main__":
    sys.exit(main())
