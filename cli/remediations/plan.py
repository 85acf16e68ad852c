"""What the remediation gate decides, as plain functions of plain data (pods and workloads as the Kubernetes
API's JSON, camelCase). Pure: the shell (:mod:`.gate`) reads the cluster, calls these, and acts.

The gate stands between a pending remediation and its approval. Before the platform repairs a node (replaces,
evicts, reboots or power-cycles it, which for a reboot kills every pod at once), the gate drains the node the
way the workloads of this package survive: cordon, evict each pod through the Eviction API (so
PodDisruptionBudgets hold; each pod gets SIGTERM and its grace period, in which the checkpoint runtime saves),
then waits until

1. **no pod of the drain is still running on the node** (a pod being evicted still runs its SIGTERM handler:
   it may be writing its checkpoint, and a repair now would cut the write; a pod is done once it is gone or
   its phase is ``Succeeded``/``Failed``), and
2. **each workload that had pods there goes on elsewhere or waits its turn**: it has a pod of its own on
   another node Running or Pending (the scheduler or Kueue's quota holds it: queued), or its controller
   suspended it (Kueue requeued it), or it finished. A bare pod (no controller) has nothing to replace it:
   the gate does not wait for a replacement that will never come, it names it as lost work.

Only then is the remediation approved. ``--force`` approves at once and names the workloads at risk: those
whose pods on the node have not exited yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
AWAITING_APPROVAL = "PENDING_APPROVAL"
"""The one state in which a remediation can be approved or rejected."""


@dataclass(frozen=True, order=True)
class WorkloadRef:
    """The workload at the top of a pod's owner chain (a Job's JobSet, a ReplicaSet's Deployment)."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> WorkloadRef:
        kind, namespace, name = text.split("/", 2)
        return cls(kind, namespace, name)


@dataclass(frozen=True)
class DrainedPod:
    """One pod the drain takes from the node."""

    namespace: str
    name: str
    uid: str
    workload: WorkloadRef | None
    """``None``: a bare pod, which nothing replaces."""
    checkpointing: bool
    """Whether it runs the checkpoint runtime (its manifest sets the runtime's contract): a SIGTERM makes it
    save before it exits."""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class DrainPlan:
    """What draining ``node`` for remediation ``remediation_id`` takes."""

    remediation_id: str
    node: str
    pods: tuple[DrainedPod, ...]
    left: tuple[str, ...] = ()
    """Pods the drain leaves (DaemonSet pods, mirror pods: a drain leaves them, as ``kubectl drain`` does)."""

    @property
    def workloads(self) -> tuple[WorkloadRef, ...]:
        return tuple(sorted({p.workload for p in self.pods if p.workload is not None}))

    @property
    def bare_pods(self) -> tuple[str, ...]:
        return tuple(p.ref for p in self.pods if p.workload is None)


@dataclass(frozen=True)
class Progress:
    """Where a drain stands: what it still waits for (empty: the remediation may be approved)."""

    writing: tuple[str, ...] = ()
    """Pods of the drain still running on the node (their SIGTERM handler may be writing a checkpoint)."""
    homeless: tuple[WorkloadRef, ...] = ()
    """Workloads with no pod running or queued elsewhere yet, not suspended, not finished."""
    moved: Mapping[str, str] = field(default_factory=dict)
    """Per workload (``str(WorkloadRef)``), where it goes on: ``running on NODE``, ``queued``, ``suspended``,
    ``finished``."""

    @property
    def done(self) -> bool:
        return not self.writing and not self.homeless

    def waiting_for(self) -> str:
        """One line: what the gate still waits for."""
        parts = []
        if self.writing:
            parts.append(f"pods still running on the node (checkpointing): {', '.join(self.writing)}")
        if self.homeless:
            parts.append(
                f"workloads not yet running or queued elsewhere: {', '.join(map(str, self.homeless))}"
            )
        return "; ".join(parts) or "nothing"


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """An object's controlling owner reference (``controller: true``), if any."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)


def is_left_by_drain(pod: Mapping[str, Any]) -> bool:
    """A pod a drain leaves on its node: a DaemonSet's (its controller puts one on every node anyway) or a
    static pod's mirror."""
    owner = controller_of(pod)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return (owner is not None and owner.get("kind") == "DaemonSet") or (
        "kubernetes.io/config.mirror" in annotations
    )


def is_finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def runs_checkpoint_runtime(pod: Mapping[str, Any], contract_env: Iterable[str]) -> bool:
    """Whether a container of the pod is given the checkpoint runtime's contract (its env names)."""
    names = set(contract_env)
    for container in (pod.get("spec") or {}).get("containers") or []:
        if any(e.get("name") in names for e in container.get("env") or []):
            return True
    return False


def drain_plan(
    remediation_id: str,
    node: str,
    pods_on_node: Sequence[Mapping[str, Any]],
    workload_of: Mapping[str, WorkloadRef | None],
    checkpointing: Mapping[str, bool],
) -> DrainPlan:
    """The drain of ``node``: every pod on it not finished and not left by a drain. ``workload_of`` and
    ``checkpointing`` are keyed by pod uid (the shell resolves owner chains; a pod missing is bare)."""
    taken, left = [], []
    for pod in pods_on_node:
        meta = pod.get("metadata") or {}
        ref = f"{meta.get('namespace')}/{meta.get('name')}"
        if is_finished(pod):
            continue
        if is_left_by_drain(pod):
            left.append(ref)
            continue
        uid = str(meta.get("uid"))
        taken.append(
            DrainedPod(
                namespace=str(meta.get("namespace")),
                name=str(meta.get("name")),
                uid=uid,
                workload=workload_of.get(uid),
                checkpointing=checkpointing.get(uid, False),
            )
        )
    return DrainPlan(
        remediation_id,
        node,
        tuple(sorted(taken, key=lambda p: p.ref)),
        tuple(sorted(left)),
    )


@dataclass(frozen=True)
class WorkloadState:
    """What the shell read of one workload after the drain."""

    finished: bool = False
    suspended: bool = False
    pods: Sequence[Mapping[str, Any]] = ()
    """Its pods now (every node)."""


def progress(
    plan: DrainPlan,
    pods_on_node: Sequence[Mapping[str, Any]],
    workloads: Mapping[WorkloadRef, WorkloadState],
) -> Progress:
    """Where the drain of ``plan`` stands, from the node's pods and the workloads' states read now."""
    drained = {p.uid for p in plan.pods}
    writing = sorted(
        f"{(pod.get('metadata') or {}).get('namespace')}/{(pod.get('metadata') or {}).get('name')}"
        for pod in pods_on_node
        if str((pod.get("metadata") or {}).get("uid")) in drained and not is_finished(pod)
    )
    homeless, moved = [], {}
    for workload in plan.workloads:
        state = workloads.get(workload, WorkloadState())
        where = _where(plan.node, drained, state)
        if where is None:
            homeless.append(workload)
        else:
            moved[str(workload)] = where
    return Progress(tuple(writing), tuple(homeless), moved)


def _where(node: str, drained: set[str], state: WorkloadState) -> str | None:
    if state.finished:
        return "finished"
    if state.suspended:
        return "suspended (queued by Kueue)"
    queued = False
    for pod in state.pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if str(meta.get("uid")) in drained or meta.get("deletionTimestamp") or is_finished(pod):
            continue
        placed = spec.get("nodeName")
        if placed == node:
            continue  # cannot be: the node is cordoned; a pod bound before the cordon goes with the node
        phase = (pod.get("status") or {}).get("phase")
        if placed and phase == "Running":
            return f"running on {placed}"
        queued = queued or phase == "Pending"
    return "queued (a pod pending)" if queued else None


def at_risk(plan: DrainPlan, pods_on_node: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """What an approval now would cut: each workload (or bare pod) with a pod of the drain still running on
    the node, and whether it checkpoints (``--force`` names them)."""
    running = {str((pod.get("metadata") or {}).get("uid")) for pod in pods_on_node if not is_finished(pod)}
    named = set()
    for pod in plan.pods:
        if pod.uid not in running:
            continue
        what = str(pod.workload) if pod.workload is not None else f"bare pod {pod.ref}"
        named.add(what + (" (checkpointing)" if pod.checkpointing else ""))
    return tuple(sorted(named))
