"""Which worker each pending fleet workload goes to (pure: plain dicts in, decisions out).

The order a user asked for (issue 31): a ``PREEMPTIBLE`` workload runs on preemptible nodes of whichever worker
has room, the first-listed one when several do, and waits where none has; a ``PREEMPTIBLE_FIRST`` one takes
preemptible room in any worker before standard room in any worker, each in the order of the workers; a
``STANDARD`` one takes standard room in that order. A workload's pod sets may mix classes (a training run's
coordinator on a standard node, its workers on preemptible ones): every pod set must fit on one worker.

Room is counted per node, as the scheduler places pods: the GPUs a Ready, schedulable node has allocatable,
less those of the pods bound to it that have not ended
(:func:`~together_clusters.platform.objects.free_gpus_by_node`, which ``together-clusters status`` shares).
A cordoned node (a preemption notice, a repair) has none. Each workload placed in a pass takes its pods' GPUs
from the room the next one sees, so a burst is spread as it would fit.

The count can be a moment behind a worker's Kueue (a workload admitted there whose pods do not exist yet), so a
workload sent to a worker and not admitted there stays ``patience_seconds`` before it is sent to a better one;
it is moved at once when its worker stops answering. A workload no worker has room for waits with the first
worker that answers (its Kueue admits it as soon as room comes), and moves when another has room first.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from together_clusters.platform import (
    COMPUTE_CLASS_LABEL,
    JOB_NAME_LABEL,
    JOBSET_API,
    JOBSET_NAME_LABEL,
    PLACEMENT_LABEL,
    PREEMPTIBLE,
    ComputeClass,
    pod_gpu_request,
)
from together_clusters.platform.objects import (
    condition_true,
    condition_with,
    free_gpus_by_node,
    takes_new_pods,
)

Room = dict[ComputeClass, list[int]]
"""A worker's free GPUs: per node class (``STANDARD`` or ``PREEMPTIBLE``), the free GPUs of each node."""

MULTIKUEUE_PENDING = "Pending"
MULTIKUEUE_READY = "Ready"
EVICTED_ON_MANAGER = "DeactivatedDueToEvictedOnManagerCluster"
"""The reason of the ``Evicted`` condition MultiKueue v0.17.0 sets on a worker's copy of a workload the manager
evicted while that worker ran it (``Deactivated`` with the cause ``EvictedOnManagerCluster``)."""
OWNER_POD_LABELS = {JOBSET_API.kind: JOBSET_NAME_LABEL, "Job": JOB_NAME_LABEL}
"""The label that names, on each pod, the object a fleet workload stands for (by its kind): the same name in
every worker, as MultiKueue copies it under its own name."""


@dataclass(frozen=True)
class PodSetDemand:
    """One pod set of a workload: the class it asked for, how many pods, and the GPUs of each."""

    compute_class: ComputeClass
    count: int
    gpus_per_pod: int


@dataclass(frozen=True)
class Pending:
    """A workload waiting for a worker: its key (``namespace/name``), its pod sets, the worker it is now sent
    to (``None``: none) and for how many seconds it has been."""

    key: str
    demands: tuple[PodSetDemand, ...]
    nominated: str | None = None
    held_seconds: float = 0.0


@dataclass(frozen=True)
class Placed:
    """A workload a worker runs: its key, the worker, its pod sets, and those of its pods there that the
    worker must find new room for (``lost``, one demand per pod: :func:`lost_pods`)."""

    key: str
    worker: str
    demands: tuple[PodSetDemand, ...]
    lost: tuple[PodSetDemand, ...] = ()


@dataclass(frozen=True)
class Decision:
    """Where a workload is sent, and why (for the dispatcher's log)."""

    worker: str
    reason: str


@dataclass(frozen=True)
class Choice:
    """A worker and the class of nodes that takes the pod sets that asked for ``PREEMPTIBLE_FIRST``."""

    worker: str
    flexible_to: ComputeClass


# --- reading the API's objects -----------------------------------------------------------------------


def node_class(node: Mapping[str, Any]) -> ComputeClass:
    """A node's class: preemptible by its label, standard otherwise (standard nodes may lack the label)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return (
        ComputeClass.PREEMPTIBLE if labels.get(COMPUTE_CLASS_LABEL) == PREEMPTIBLE else ComputeClass.STANDARD
    )


def worker_room(nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> Room:
    """The free GPUs of each node of a worker that takes new pods, by class, fullest first."""
    taking = [node for node in nodes if takes_new_pods(node)]
    free = free_gpus_by_node(taking, pods)
    room: Room = {ComputeClass.STANDARD: [], ComputeClass.PREEMPTIBLE: []}
    for node in taking:
        left = free.get(str((node.get("metadata") or {}).get("name")), 0)
        if left > 0:
            room[node_class(node)].append(left)
    return {compute_class: sorted(left) for compute_class, left in room.items()}


def demands_of(workload: Mapping[str, Any]) -> tuple[PodSetDemand, ...]:
    """A Kueue Workload's pod sets: each one's class (its pods' :data:`PLACEMENT_LABEL`; ``STANDARD`` without
    one, as such a pod does not tolerate preemptible nodes), count, and GPUs per pod."""
    found = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        template = pod_set.get("template") or {}
        label = ((template.get("metadata") or {}).get("labels") or {}).get(PLACEMENT_LABEL)
        known = {c.value: c for c in ComputeClass}
        compute_class = known.get(str(label), ComputeClass.STANDARD)
        gpus = pod_gpu_request(template.get("spec") or {})
        found.append(PodSetDemand(compute_class, int(pod_set.get("count", 1)), gpus))
    return tuple(found)


def being_evicted(workload: Mapping[str, Any]) -> bool:
    """Whether the manager's Kueue is evicting the workload: ``Evicted`` True, which Kueue v0.17.0 sets (with its
    checks reset to Pending and its cluster cleared) before it releases the quota, and sets False only when it
    reserves the quota again. Such a workload looks as if it awaited a worker, and may be sent to one: when its
    worker stopped answering, the manager kept its quota after evicting it, and a nomination was how it ran
    again (the twin's test of a worker that stops answering). It must never be given back then: a check set to ``Retry``
    while ``Evicted`` is True is never reset (kubernetes-sigs/kueue#3543), as Kueue's workload controller skips
    a workload already evicted and its scheduler one with a check in ``Retry``; it waits for ever (seen in CI:
    a trial and a training run given back while the manager evicted them)."""
    return condition_true(workload, "Evicted")


def awaits_a_worker(workload: Mapping[str, Any], admission_check: str) -> bool:
    """Whether MultiKueue waits for a worker to be nominated: quota reserved on the manager, the fleet's
    admission check pending, no worker running it yet, not finished, not being deleted (the conditions of
    Kueue's own Incremental dispatcher)."""
    status = workload.get("status") or {}
    if (workload.get("metadata") or {}).get("deletionTimestamp") or status.get("clusterName"):
        return False
    if condition_true(workload, "Finished") or not condition_true(workload, "QuotaReserved"):
        return False
    checks = status.get("admissionChecks") or []
    return any(c.get("name") == admission_check and c.get("state") == MULTIKUEUE_PENDING for c in checks)


def runs_in_a_worker(workload: Mapping[str, Any], admission_check: str) -> bool:
    """Whether a worker runs the workload for MultiKueue: admitted there (``clusterName``, the fleet's
    admission check ``Ready``), not finished, not being deleted."""
    status = workload.get("status") or {}
    if (workload.get("metadata") or {}).get("deletionTimestamp") or not status.get("clusterName"):
        return False
    if condition_true(workload, "Finished"):
        return False
    checks = status.get("admissionChecks") or []
    return any(c.get("name") == admission_check and c.get("state") == MULTIKUEUE_READY for c in checks)


def copy_in(workload: Mapping[str, Any], named: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The copy of the manager's ``workload`` among one worker's Workloads (``named``, by name: MultiKueue names a
    copy as the manager's Workload), in the same namespace; None when there is none."""
    meta = workload.get("metadata") or {}
    found = named.get(str(meta.get("name")))
    if found is None or (found.get("metadata") or {}).get("namespace") != meta.get("namespace"):
        return None
    return found


def left_deactivated(workload: Mapping[str, Any], copies: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The workers (keys of ``copies``: each worker's Workloads by name) that still hold a copy of the manager's
    ``workload`` deactivated because the manager evicted it (:data:`EVICTED_ON_MANAGER`), not being deleted.

    MultiKueue v0.17.0 removes such a copy only while the manager's workload has no quota reserved; when Kueue
    requeues and reserves it again before MultiKueue reconciles it (a give-back is requeued at once), each
    later reconcile sees the copy first and stops there, creating no copy in the worker nominated next: the
    workload waits for ever (seen on the twin, a sweep moving between regions)."""
    found = []
    for worker, named in copies.items():
        copy = copy_in(workload, named)
        if copy is None or (copy.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if condition_with(copy, "Evicted", "True", EVICTED_ON_MANAGER) is not None:
            found.append(worker)
    return found


@dataclass(frozen=True)
class Prompt:
    """A change of a worker's copy that MultiKueue must act on for a failover to go on: in which worker, what
    changed (``reason``, a condition reason), and the copy's ``resourceVersion`` there (one prompt per change)."""

    worker: str
    reason: str
    copy_version: str


COPY_RELEASED = "WorkerCopyReleased"
COPY_ADMITTED = "WorkerCopyAdmitted"


def moved_before(workload: Mapping[str, Any]) -> bool:
    """Whether the manager's Kueue has evicted the workload at least once (``schedulingStats.evictions``): a
    failover, given back by the dispatcher or by MultiKueue, rather than a first admission."""
    stats = (workload.get("status") or {}).get("schedulingStats") or {}
    return any(int(e.get("count") or 0) > 0 for e in stats.get("evictions") or [])


def prompt_for(
    workload: Mapping[str, Any],
    copies: Mapping[str, Mapping[str, Mapping[str, Any]]],
    worker_of: Mapping[str, str],
) -> Prompt | None:
    """The change of a worker's copy of a workload being moved that MultiKueue v0.17.0 has not acted on yet.

    MultiKueue sees a change of a worker's Workload only through its watch of that worker, whose events it
    handles one second later (``constants.UpdatesBatchPeriod``, not configurable in v0.17.0), where a change
    of the manager's own Workload is handled at once. A failover meets it twice (measured on the twin, 4.3 s
    in all): the former worker's copy releasing its quota, which MultiKueue copies to the manager's job so the
    manager releases its own and requeues; and the next worker's copy admitted, upon which MultiKueue creates
    the job there and marks the workload admitted. Each is one of these prompts, for a workload that has been
    evicted before (:func:`moved_before`; a first admission of many is left to the batching, which spares
    MultiKueue's worker clients, fixed at 5 requests/s):

    - the manager is evicting it with its quota still reserved, and its copy in a worker (``copies``: each
      answering worker's Workloads by name) has released its quota there (:data:`COPY_RELEASED`);
    - it awaits the worker it is nominated to (``worker_of``: the worker of each MultiKueueCluster), and its
      copy there is admitted (:data:`COPY_ADMITTED`)."""
    status = workload.get("status") or {}
    meta = workload.get("metadata") or {}
    if meta.get("deletionTimestamp") or not moved_before(workload) or condition_true(workload, "Finished"):
        return None
    if not condition_true(workload, "QuotaReserved") or status.get("clusterName"):
        return None

    def version(found: Mapping[str, Any]) -> str:
        return str((found.get("metadata") or {}).get("resourceVersion"))

    if being_evicted(workload):
        for worker in sorted(copies):
            found = copy_in(workload, copies[worker])
            if found is not None and not condition_true(found, "QuotaReserved"):
                return Prompt(worker, COPY_RELEASED, version(found))
        return None
    nominated = status.get("nominatedClusterNames") or []
    sent_to = worker_of.get(str(nominated[0])) if len(nominated) == 1 else None
    if sent_to is None:
        return None
    found = copy_in(workload, copies.get(sent_to) or {})
    if found is not None and condition_true(found, "Admitted"):
        return Prompt(sent_to, COPY_ADMITTED, version(found))
    return None


def pods_of(workload: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods of ``pods`` that run the workload (in a worker: its namespace, and the label that names the
    JobSet or Job it stands for, :data:`OWNER_POD_LABELS`); none for a kind the fleet does not submit."""
    meta = workload.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    owner = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    label = OWNER_POD_LABELS.get(str((owner or {}).get("kind")))
    if owner is None or label is None:
        return []
    return [
        pod
        for pod in pods
        if (pod.get("metadata") or {}).get("namespace") == meta.get("namespace")
        and ((pod.get("metadata") or {}).get("labels") or {}).get(label) == owner.get("name")
    ]


def stranded(pod: Mapping[str, Any]) -> bool:
    """Whether the scheduler found no node for the pod: not bound, not being deleted, ``PodScheduled`` False
    for ``Unschedulable`` (a pod not tried yet, or held by a scheduling gate, is not)."""
    if (pod.get("spec") or {}).get("nodeName") or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return condition_with(pod, "PodScheduled", "False", "Unschedulable") is not None


def schedulable_nodes(nodes: Sequence[Mapping[str, Any]]) -> set[str]:
    """The names of a worker's nodes that take new pods (:func:`~together_clusters.platform.objects.takes_new_pods`)."""
    return {str((node.get("metadata") or {}).get("name")) for node in nodes if takes_new_pods(node)}


def displaced(pod: Mapping[str, Any], schedulable: Collection[str]) -> bool:
    """Whether the pod is being taken off a node that takes no new pods: bound, being deleted (a preemption's
    SIGTERM, a repair's drain), not finished, and its node cordoned or gone. Its replacement needs room on
    another node."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    return (
        bool(node_name)
        and bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        and (pod.get("status") or {}).get("phase") != "Succeeded"
        and node_name not in schedulable
    )


def lost_pods(
    its_pods: Sequence[Mapping[str, Any]], schedulable: Collection[str]
) -> tuple[PodSetDemand, ...]:
    """The pods of one workload its worker must find new room for, one demand each: those the scheduler found
    no node for (:func:`stranded`), and those being taken off a cordoned or vanished node (:func:`displaced`)
    whose replacement does not exist yet. Counting these from the preemption notice on, rather than from the
    replacement's failed scheduling, saves the replacement's creation and scheduling attempt (about 2 s on
    the twin) when the worker has no room left. Each pod waiting for a node, stranded or not, is taken to
    replace one displaced pod."""
    waiting = [
        pod
        for pod in its_pods
        if not (pod.get("spec") or {}).get("nodeName")
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]
    leaving = [pod for pod in its_pods if displaced(pod, schedulable)]
    lost = [pod for pod in waiting if stranded(pod)] + leaving[len(waiting) :]
    return tuple(pod_demand(pod) for pod in lost)


def pod_demand(pod: Mapping[str, Any]) -> PodSetDemand:
    """One pod as a demand: the class its workload asked for (:data:`PLACEMENT_LABEL`), its GPUs."""
    label = ((pod.get("metadata") or {}).get("labels") or {}).get(PLACEMENT_LABEL)
    known = {c.value: c for c in ComputeClass}
    return PodSetDemand(
        known.get(str(label), ComputeClass.STANDARD), 1, pod_gpu_request(pod.get("spec") or {})
    )


# --- deciding ----------------------------------------------------------------------------------------


def _take(free: list[int], gpus: int, count: int) -> bool:
    """Place ``count`` pods of ``gpus`` GPUs each on the nodes' free GPUs (best fit), in place."""
    for _ in range(count):
        fitting = [index for index, left in enumerate(free) if left >= gpus]
        if not fitting:
            return False
        best = min(fitting, key=lambda index: free[index])
        free[best] -= gpus
    return True


def fits(demands: Sequence[PodSetDemand], room: Room, flexible_to: ComputeClass) -> Room | None:
    """The room left once every pod set is placed (``PREEMPTIBLE_FIRST`` ones on ``flexible_to`` nodes); None
    when one does not fit. Pod sets without GPUs take no GPU room (every cluster keeps a standard node)."""
    left = {compute_class: list(free) for compute_class, free in room.items()}
    for demand in sorted(demands, key=lambda d: -d.gpus_per_pod):
        if demand.gpus_per_pod <= 0 or demand.count <= 0:
            continue
        wanted = demand.compute_class
        if wanted is ComputeClass.PREEMPTIBLE_FIRST:
            wanted = flexible_to
        if not _take(left.setdefault(wanted, []), demand.gpus_per_pod, demand.count):
            return None
    return left


def options(demands: Sequence[PodSetDemand], workers: Sequence[str]) -> list[Choice]:
    """Where a workload may go, best first: with ``PREEMPTIBLE_FIRST`` pod sets, preemptible room in each
    worker before standard room in each worker; otherwise each worker in order."""
    if any(d.compute_class is ComputeClass.PREEMPTIBLE_FIRST for d in demands):
        return [
            Choice(worker, compute_class)
            for compute_class in (ComputeClass.PREEMPTIBLE, ComputeClass.STANDARD)
            for worker in workers
        ]
    return [Choice(worker, ComputeClass.PREEMPTIBLE) for worker in workers]


def _first_fit(
    demands: Sequence[PodSetDemand], choices: Sequence[Choice], rooms: Mapping[str, Room | None]
) -> tuple[Choice, Room] | None:
    for choice in choices:
        room = rooms.get(choice.worker)
        left = fits(demands, room, choice.flexible_to) if room is not None else None
        if left is not None:
            return choice, left
    return None


def _reason(demands: Sequence[PodSetDemand], choice: Choice) -> str:
    classes = {d.compute_class for d in demands if d.gpus_per_pod > 0 and d.count > 0}
    named = sorted({choice.flexible_to if c is ComputeClass.PREEMPTIBLE_FIRST else c for c in classes})
    return f"room on its {' and '.join(str(c) for c in named) or 'standard'} nodes"


def nominations(
    pending: Sequence[Pending],
    workers: Sequence[str],
    rooms: Mapping[str, Room | None],
    patience_seconds: float,
) -> dict[str, Decision]:
    """The worker each workload of ``pending`` (in the order submitted) is to be sent to, for those whose
    worker changes. ``rooms``: each worker's room, ``None`` for one that does not answer."""
    left: dict[str, Room | None] = dict(rooms)
    changes: dict[str, Decision] = {}
    answering = [worker for worker in workers if left.get(worker) is not None]
    for workload in pending:
        choices = options(workload.demands, workers)
        best = _first_fit(workload.demands, choices, left)
        current = workload.nominated if workload.nominated in answering else None
        stays = current is not None and (
            best is None or best[0].worker == current or workload.held_seconds < patience_seconds
        )
        if stays and current is not None:
            here = _first_fit(workload.demands, [c for c in choices if c.worker == current], left)
            if here is not None:
                left[current] = here[1]
            continue
        if best is not None:
            target = best[0].worker
            left[target] = best[1]
            reason = _reason(workload.demands, best[0])
        elif answering:
            target = answering[0]  # room nowhere: wait with the first worker that answers
            reason = "no worker has room: it waits there"
        else:
            continue
        if target != workload.nominated:
            changes[workload.key] = Decision(target, reason)
    return changes


def moves(
    placed: Sequence[Placed], workers: Sequence[str], rooms: Mapping[str, Room | None]
) -> dict[str, Decision]:
    """The workloads to give back to MultiKueue, and the worker that has the room each needs: those whose
    worker lost the room for some of its pods (they were found no node, or are being taken off a cordoned
    node, and by the count none of that worker's schedulable nodes has room for them) while another worker,
    answering, has room for the whole workload. The worker's PodsReady timeout would give them back too,
    later; what the count cannot see (a pod pinned to a node that went, a taint) is left to it. Each move
    takes its room from what the next one sees."""
    left: dict[str, Room | None] = dict(rooms)
    changes: dict[str, Decision] = {}
    for workload in placed:
        here = left.get(workload.worker)
        if here is None or not workload.lost:
            continue
        where_it_is = [c for c in options(workload.lost, workers) if c.worker == workload.worker]
        if _first_fit(workload.lost, where_it_is, {workload.worker: here}) is not None:
            continue  # room there still: its scheduler places them
        elsewhere = [c for c in options(workload.demands, workers) if c.worker != workload.worker]
        best = _first_fit(workload.demands, elsewhere, left)
        if best is None:
            continue
        left[best[0].worker] = best[1]
        gpus = sum(d.gpus_per_pod * d.count for d in workload.lost)
        changes[workload.key] = Decision(
            best[0].worker,
            f"{workload.worker} has no room left for {len(workload.lost)} of its pods ({gpus} GPUs); "
            + _reason(workload.demands, best[0]),
        )
    return changes
