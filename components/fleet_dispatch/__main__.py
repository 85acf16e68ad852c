"""``python -m together_clusters.components.fleet_dispatch --config FILE --workers-dir DIR
--service-account-dir DIR``: the dispatcher's passes, on the manager (see :mod:`.plan` for the decisions).

Each pass reads the manager's workloads of the fleet's namespace and, for every worker whose
``MultiKueueCluster`` is active, its nodes and pods; and sends each waiting workload to its worker by setting
``status.nominatedClusterNames`` (an apply that carries the workload's ``resourceVersion``, so a workload Kueue
changed in between is left to the next pass; see :mod:`.nomination`). A worker it cannot read is treated as one that does not answer. It prints a line per decision
and per change of a worker's state, never a credential.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from together_clusters.errors import DispatchRequestError
from together_clusters.platform.objects import condition_true

from . import plan
from .kube import KubeClient
from .nomination import ADMISSION_MANAGER, nomination_apply, retry_apply


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


def say(message: str) -> None:
    print(f"fleet-dispatch: {message}", flush=True)


class Dispatcher:
    """The passes' state: when each workload was first seen with its current worker, each worker's last state."""

    def __init__(self, settings: Settings, manager: KubeClient, workers_dir: Path) -> None:
        self.settings = settings
        self.manager = manager
        self.workers_dir = workers_dir
        self.held_since: dict[str, tuple[str | None, float]] = {}
        self.answering: dict[str, bool] = {}
        self.unreadable: set[str] = set()
        self.pods: dict[str, list[Mapping[str, Any]]] = {}
        """The unfinished pods of each worker that answered this pass."""
        self.waiting_for_copy: set[str] = set()

    def _workloads_path(self) -> str:
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
                client = KubeClient.from_kubeconfig((self.workers_dir / worker.name).read_text())
                # resourceVersion 0: served from the API server's cache, as an informer's first list is.
                nodes = client.get("/api/v1/nodes", {"resourceVersion": "0"}).get("items") or []
                pods = (
                    client.get(
                        "/api/v1/pods",
                        {
                            "fieldSelector": "status.phase!=Succeeded,status.phase!=Failed",
                            "resourceVersion": "0",
                        },
                    ).get("items")
                    or []
                )
                room = plan.worker_room(nodes, pods)
                self.pods[worker.name] = pods
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
        meta = workload["metadata"]
        body = nomination_apply(workload, [cluster], self.settings.api_version)
        if body is None:
            return False
        try:
            self.manager.apply(f"{self._workloads_path()}/{meta['name']}/status", body, ADMISSION_MANAGER)
            return True
        except DispatchRequestError as error:
            if error.status != 409:  # 409: Kueue changed it since it was read; the next pass sees it anew
                say(f"workload {meta['namespace']}/{meta['name']}: could not set its worker: {error}")
            return False

    def _give_back(self, workload: Mapping[str, Any], decision: plan.Decision) -> bool:
        """Set the fleet's admission check of a workload its worker cannot run to ``Retry``, as MultiKueue
        does when the worker evicts it (see :func:`.nomination.retry_apply`); False when it changed since."""
        meta = workload["metadata"]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        message = f"fleet dispatcher: {decision.reason}; moving to {decision.worker}"
        body = retry_apply(workload, self.settings.admission_check, message, now, self.settings.api_version)
        if body is None:
            return False
        try:
            self.manager.apply(f"{self._workloads_path()}/{meta['name']}/status", body, ADMISSION_MANAGER)
            return True
        except DispatchRequestError as error:
            if error.status != 409:
                say(f"workload {meta['namespace']}/{meta['name']}: could not give it back: {error}")
            return False

    def _move_stranded(
        self,
        running: list[Mapping[str, Any]],
        rooms: Mapping[str, plan.Room | None],
        by_cluster: Mapping[str, str],
    ) -> None:
        """Give back each workload whose worker lost the room for some of its pods while another worker has
        room for it (:func:`.plan.moves`), without waiting for the worker's PodsReady timeout."""
        placed: list[plan.Placed] = []
        objects: dict[str, Mapping[str, Any]] = {}
        for workload in running:
            worker = by_cluster.get(str((workload.get("status") or {}).get("clusterName")))
            if worker is None or worker not in self.pods:
                continue
            key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
            try:
                demands = plan.demands_of(workload)
            except ValueError:
                continue
            its_pods = plan.pods_of(workload, self.pods[worker])
            stranded = tuple(plan.pod_demand(pod) for pod in its_pods if plan.stranded(pod))
            placed.append(plan.Placed(key, worker, demands, stranded))
            objects[key] = workload
        workers = [w.name for w in self.settings.workers]
        for key, decision in plan.moves(placed, workers, rooms).items():
            if self._give_back(objects[key], decision):
                say(f"workload {key} given back ({decision.reason}; {_free(rooms)})")

    def run_pass(self) -> None:
        settings = self.settings
        workloads = self.manager.get(self._workloads_path()).get("items") or []
        waiting = [w for w in workloads if plan.awaits_a_worker(w, settings.admission_check)]
        running = [w for w in workloads if plan.runs_in_a_worker(w, settings.admission_check)]
        if not waiting and not running:
            self.held_since.clear()
            return
        self.pods = {}
        rooms = {worker.name: self._room_of(worker) for worker in settings.workers}
        by_cluster = {worker.cluster: worker.name for worker in settings.workers}
        self._move_stranded(running, rooms, by_cluster)
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
            key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
            nominated_clusters = (workload.get("status") or {}).get("nominatedClusterNames") or []
            nominated = by_cluster.get(nominated_clusters[0]) if nominated_clusters else None
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
        clusters = {worker.name: worker.cluster for worker in settings.workers}
        workers = [w.name for w in settings.workers]
        decisions = plan.nominations(pending, workers, rooms, settings.patience_seconds)
        for key, decision in decisions.items():
            if self._nominate(objects[key], clusters[decision.worker]):
                self.held_since[key] = (decision.worker, now)
                say(f"workload {key} -> {decision.worker} ({decision.reason}; {_free(rooms)})")


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
    while True:
        try:
            dispatcher.run_pass()
        except DispatchRequestError as error:
            say(f"the manager's API server: {error}")
        if args.once:
            return 0
        time.sleep(settings.interval_seconds)


if __name__ == "__main__":
    sys.exit(main())
