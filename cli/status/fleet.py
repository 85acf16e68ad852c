"""The fleets of a stack as ``status`` shows them: per FleetQueue, each worker (reachable from here or not, its
free preemptible GPUs) and each workload the manager's Kueue holds (where it runs, on which class of nodes,
queued or moving, how often it was evicted from a worker so far). Pure: it reads the state's FleetQueue
components and the Kubernetes views ``live`` already took of every cluster of the stack.

Where a workload runs is MultiKueue's word on the manager (the Workload's ``status.clusterName``, a
MultiKueueCluster named ``<queue>-<worker>``); on which nodes, the worker's own pods of it. Failovers are the
evictions the manager's Kueue counted for the workload (``status.schedulingStats.evictions``): each one
sent it back to be dispatched again, to whichever worker then had room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from together_clusters.platform import (
    COMPUTE_CLASS_LABEL,
    JOB_NAME_LABEL,
    JOBSET_NAME_LABEL,
    ComputeClass,
)
from together_clusters.platform.objects import condition_true, free_gpus_by_node

from ..stack_state import StateResource
from ..workloads import node_class

FLEET_TYPE = "together:components:FleetQueue"


@dataclass(frozen=True)
class FleetWorker:
    """One worker of a fleet, as this machine reads its Kubernetes API."""

    name: str
    cluster: str
    """The stack's resource name of the worker's cluster (``-`` when the state does not say)."""
    reachable: bool
    free_preemptible_gpus: int | None
    """Allocatable GPUs of its schedulable preemptible nodes less what pods there request; None unreachable."""
    error: str | None = None


@dataclass(frozen=True)
class FleetWorkload:
    """One workload the fleet's manager holds."""

    name: str
    """``namespace/name`` of the JobSet or Job submitted to the manager."""
    state: str
    """``queued`` (no quota yet), ``dispatching`` (quota on the manager, no worker yet), ``moving`` (evicted from a
    worker, waiting for the next), ``admitted`` (a worker holds it, no pod running yet), ``running`` or
    ``finished``."""
    worker: str | None
    node_classes: tuple[str, ...] = ()
    """The classes of the nodes its running pods are on, in the worker (sorted)."""
    failovers: int = 0
    arrived_at: str | None = None
    """When its pods first ran in ``worker`` (the earliest start of its running pods there), if they run."""


@dataclass(frozen=True)
class FleetReport:
    name: str
    queue: str
    workers: tuple[FleetWorker, ...]
    workloads: tuple[FleetWorkload, ...] = ()
    manager_error: str | None = None
    """Why the manager's workloads could not be read (None: read)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Fleet:
    """What the state says of one FleetQueue."""

    name: str
    queue: str
    namespace: str
    workers: Mapping[str, str | None] = field(default_factory=dict)
    """Worker name to its cluster's URN (None when the state does not say)."""
    manager: str | None = None


def fleets_in_state(export: Mapping[str, Any]) -> list[_Fleet]:
    """The FleetQueue components of a ``pulumi stack export`` document (components are not custom resources:
    read from the raw list)."""
    deployment = export.get("deployment", export)
    found = []
    for raw in deployment.get("resources") or []:
        if raw.get("type") != FLEET_TYPE or raw.get("delete"):
            continue
        outputs = raw.get("outputs") or {}
        clusters = outputs.get("worker_clusters") or {}
        found.append(
            _Fleet(
                name=str(raw["urn"]).rsplit("::", 1)[-1],
                queue=str(outputs.get("local_queue_name") or ""),
                namespace=str(outputs.get("namespace") or "default"),
                workers={str(w): clusters.get(w) for w in outputs.get("workers") or []},
                manager=outputs.get("manager_cluster"),
            )
        )
    return found


def fleet_reports(
    export: Mapping[str, Any], clusters: Sequence[StateResource], snapshots: Mapping[str, Any]
) -> list[FleetReport]:
    """A report per FleetQueue of the stack; ``snapshots`` are ``live``'s, by cluster id, with their
    ``kubernetes`` views."""
    by_urn = {c.urn: c for c in clusters}

    def view_of(urn: str | None) -> Mapping[str, Any] | None:
        cluster = by_urn.get(urn or "")
        snapshot = snapshots.get(cluster.id) if cluster is not None else None
        return (snapshot or {}).get("kubernetes")

    reports = []
    for fleet in fleets_in_state(export):
        views = {worker: view_of(urn) for worker, urn in fleet.workers.items()}
        workers = tuple(
            _worker(worker, by_urn.get(urn or ""), views[worker]) for worker, urn in fleet.workers.items()
        )
        manager = view_of(fleet.manager)
        if manager is None or manager.get("error"):
            why = (manager or {}).get("error") or "the manager cluster was not read"
            reports.append(FleetReport(fleet.name, fleet.queue, workers, manager_error=str(why)))
            continue
        workloads = tuple(
            _workload(w, fleet, views)
            for w in manager.get("kueue_workloads") or []
            if (w.get("spec") or {}).get("queueName") == fleet.queue
            and (w.get("metadata") or {}).get("namespace", "default") == fleet.namespace
        )
        reports.append(FleetReport(fleet.name, fleet.queue, workers, tuple(sorted(workloads, key=_by_name))))
    return reports


def _by_name(workload: FleetWorkload) -> str:
    return workload.name


def _worker(name: str, cluster: StateResource | None, view: Mapping[str, Any] | None) -> FleetWorker:
    resource = cluster.name if cluster is not None else "-"
    if view is None or view.get("error"):
        why = (view or {}).get("error") or "its cluster was not read"
        return FleetWorker(name, resource, reachable=False, free_preemptible_gpus=None, error=str(why))
    return FleetWorker(name, resource, reachable=True, free_preemptible_gpus=free_preemptible_gpus(view))


def free_preemptible_gpus(view: Mapping[str, Any]) -> int:
    """The GPUs a new preemptible pod could still take in the cluster of ``view``: allocatable on schedulable
    preemptible nodes, less the requests of the pods the view holds there (the package's workloads); counted
    as the fleet's dispatcher counts them."""
    preemptible = [
        node
        for node in view.get("nodes") or []
        if ((node.get("metadata") or {}).get("labels") or {}).get(COMPUTE_CLASS_LABEL)
        == ComputeClass.PREEMPTIBLE
    ]
    free = free_gpus_by_node(preemptible, view.get("pods") or [])
    return sum(max(0, gpus) for gpus in free.values())


def _owner(workload: Mapping[str, Any]) -> tuple[str, str]:
    """The kind and name of what the Workload stands for (its controller owner)."""
    owners = (workload.get("metadata") or {}).get("ownerReferences") or []
    owner = next((o for o in owners if o.get("controller")), owners[0] if owners else {})
    return str(owner.get("kind") or ""), str(
        owner.get("name") or (workload.get("metadata") or {}).get("name")
    )


def _workload(
    workload: Mapping[str, Any], fleet: _Fleet, views: Mapping[str, Mapping[str, Any] | None]
) -> FleetWorkload:
    status = workload.get("status") or {}
    kind, name = _owner(workload)
    namespace = (workload.get("metadata") or {}).get("namespace") or "default"
    evictions = ((status.get("schedulingStats") or {}).get("evictions")) or []
    failovers = sum(int(e.get("count") or 0) for e in evictions)
    cluster = status.get("clusterName")
    prefix = f"{fleet.queue}-"
    worker = cluster[len(prefix) :] if isinstance(cluster, str) and cluster.startswith(prefix) else cluster
    classes, arrived = _running_classes(views.get(worker) if worker else None, kind, name, namespace)
    if condition_true(workload, "Finished"):
        state = "finished"
    elif worker and condition_true(workload, "Admitted"):
        state = "running" if classes else "admitted"
    elif condition_true(workload, "QuotaReserved"):
        state = "dispatching"
    elif failovers:
        state = "moving"
    else:
        state = "queued"
    return FleetWorkload(f"{namespace}/{name}", state, worker or None, classes, failovers, arrived)


def _running_classes(
    view: Mapping[str, Any] | None, kind: str, name: str, namespace: str
) -> tuple[tuple[str, ...], str | None]:
    """The classes of the nodes the worker's running pods of ``kind``/``name`` are on, and the earliest start
    of those pods (RFC 3339, as the API gives it)."""
    if not view or view.get("error"):
        return (), None
    label = JOB_NAME_LABEL if kind == "Job" else JOBSET_NAME_LABEL
    nodes = {str((n.get("metadata") or {}).get("name")): n for n in view.get("nodes") or []}
    found = set()
    starts = []
    for pod in view.get("pods") or []:
        metadata = pod.get("metadata") or {}
        if (metadata.get("labels") or {}).get(label) != name or metadata.get(
            "namespace", "default"
        ) != namespace:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        status = pod.get("status") or {}
        if node and status.get("phase") == "Running":
            found.add(str(node_class(node, nodes) or "unknown"))
            if status.get("startTime"):
                starts.append(str(status["startTime"]))
    return tuple(sorted(found)), min(starts, default=None)


def arrivals_by_cluster(reports: Sequence[FleetReport]) -> dict[str, list[str]]:
    """The moments workloads that moved (a failover or more) started running in each worker, by the worker's
    cluster resource name: what the PNG timeline marks on that cluster's line."""
    found: dict[str, list[str]] = {}
    for report in reports:
        clusters = {w.name: w.cluster for w in report.workers}
        for workload in report.workloads:
            if workload.failovers and workload.arrived_at and workload.worker in clusters:
                found.setdefault(clusters[workload.worker], []).append(workload.arrived_at)
    return found
