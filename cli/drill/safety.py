"""Before a drill touches a cluster: the plan (which node, which pods, what happens to each), the pre-check
that refuses a drill whose pods would have nowhere to go, and the confirmation naming the context.

A remediation drill (``--remediation MODE``) has the same pre-check, plus what only the compute API knows:
the node's instance (:func:`instance_of`, through the cluster's ``gpu_worker_nodes``), the instance's active
remediation if it has one (the API allows one at a time: :func:`active_text`), and what the mode costs in
capacity (:func:`capacity_text`).

The pre-check is a first fit of the preempted pods onto the other nodes, as the scheduler's filters would
judge them in their simplest form: the node is schedulable and Ready, the pod tolerates its NoSchedule and
NoExecute taints, matches its labels (``nodeSelector`` and required node affinity), and the node has room
for the pod's requests (CPU, memory, GPUs, any extended resource, the pod count) beside the pods it runs.
Pod (anti-)affinity and topology spread are not modelled: the check can pass a drill whose replacement
still cannot schedule, never refuse one that could. The rules are pure functions of the objects as the
API serializes them (camelCase dicts); the shell reads them with one list of nodes and one of pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from kubernetes.utils import parse_quantity

from together_clusters.errors import DrillError
from together_clusters.platform import LifecycleReason, kubernetes_node_name
from together_clusters.platform.objects import condition, condition_true
from together_clusters.provider.vocabulary import RemediationMode

from .modes import capacity_text, remediation_steps, short_mode

_TIMEOUT = 10
_TERMINAL = ("Succeeded", "Failed")
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
_SHOWN_NODES = 3


@dataclass(frozen=True)
class PodNeed:
    """A pod the preemption takes, and what a node must offer its replacement."""

    namespace: str
    name: str
    owner: str | None
    """``Kind/name`` of the pod's controller; ``None``: a bare pod, nothing replaces it."""
    requests: Mapping[str, float]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: Sequence[Mapping[str, Any]] = ()
    """``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`` (any one must match)."""
    tolerations: Sequence[Mapping[str, Any]] = ()

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class NodeRoom:
    """A node that could take a replacement, and what it has left."""

    name: str
    labels: Mapping[str, str]
    taints: Sequence[Mapping[str, Any]]
    free: dict[str, float]
    unusable: str = ""
    """Why no pod can go there at all (cordoned, not Ready); empty when it can take pods."""


@dataclass(frozen=True)
class Placement:
    """Where each replaceable pod could go (``None``: nowhere, with the reason per node)."""

    pod: PodNeed
    node: str | None
    why_not: str = ""


# --- pure: from the API's objects ----------------------------------------------------------------


def pod_requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """What the scheduler reserves for a pod: its containers' requests summed (a container's limits stand
    for requests it does not set, as the API server defaults them), at least any one init container's,
    and one of the node's pod slots."""
    spec = pod.get("spec") or {}

    def of(container: Mapping[str, Any]) -> dict[str, float]:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {name: float(parse_quantity(value)) for name, value in asked.items()}

    total: dict[str, float] = {}
    for container in spec.get("containers") or []:
        for name, value in of(container).items():
            total[name] = total.get(name, 0.0) + value
    for container in spec.get("initContainers") or []:
        for name, value in of(container).items():
            total[name] = max(total.get(name, 0.0), value)
    total["pods"] = 1.0
    return total


def _controller(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)


def is_daemon(pod: Mapping[str, Any]) -> bool:
    """A DaemonSet's pod: a drain leaves it, and its controller puts one on every node anyway."""
    owner = _controller(pod)
    return owner is not None and owner.get("kind") == "DaemonSet"


def pod_need(pod: Mapping[str, Any]) -> PodNeed:
    """The pod as the pre-check sees it."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    owner = _controller(pod)
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return PodNeed(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        owner=None if owner is None else f"{owner.get('kind')}/{owner.get('name')}",
        requests=pod_requests(pod),
        node_selector=spec.get("nodeSelector") or {},
        required_terms=required.get("nodeSelectorTerms") or [],
        tolerations=spec.get("tolerations") or [],
    )


def node_room(node: Mapping[str, Any], pods_on_it: Iterable[Mapping[str, Any]]) -> NodeRoom:
    """The node's allocatable less the requests of the pods it runs (terminal ones hold nothing)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    free = {name: float(parse_quantity(value)) for name, value in (status.get("allocatable") or {}).items()}
    for pod in pods_on_it:
        if (pod.get("status") or {}).get("phase") in _TERMINAL:
            continue
        for name, value in pod_requests(pod).items():
            free[name] = free.get(name, 0.0) - value
    unusable = ""
    if spec.get("unschedulable"):
        unusable = "cordoned"
    elif condition(node, "Ready") is not None and not condition_true(node, "Ready"):
        unusable = "not Ready"
    return NodeRoom(meta.get("name", ""), meta.get("labels") or {}, spec.get("taints") or [], free, unusable)


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expression_holds(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expression.get("key", ""), expression.get("operator"), expression.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _term_holds(term: Mapping[str, Any], node: NodeRoom) -> bool:
    fields = {"metadata.name": node.name}
    return all(_expression_holds(e, node.labels) for e in term.get("matchExpressions") or []) and all(
        _expression_holds(e, fields) for e in term.get("matchFields") or []
    )


def why_not(pod: PodNeed, node: NodeRoom) -> str:
    """Why ``pod`` cannot go to ``node`` (the first reason found), empty when it can."""
    if node.unusable:
        return node.unusable
    for taint in node.taints:
        if taint.get("effect") in _BLOCKING_EFFECTS and not _tolerates(pod.tolerations, taint):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"taint {taint.get('key')}{value}:{taint.get('effect')} not tolerated"
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return f"not labelled {key}={value}"
    if pod.required_terms and not any(_term_holds(t, node) for t in pod.required_terms):
        return "the pod's required node affinity does not match"
    for name, wanted in sorted(pod.requests.items()):
        if wanted > 0 and node.free.get(name, 0.0) < wanted:
            return f"{_amount(max(node.free.get(name, 0.0), 0.0))} of {_amount(wanted)} {name} free"
    return ""


def _amount(value: float) -> str:
    return f"{value:g}"


def place(pods: Sequence[PodNeed], others: Sequence[NodeRoom]) -> list[Placement]:
    """First fit of the replaceable pods onto the other nodes, the biggest GPU asks first, each placed pod
    taking its room. Bare pods are left out: nothing would replace them."""
    rooms = [NodeRoom(n.name, n.labels, n.taints, dict(n.free), n.unusable) for n in others]

    def size(pod: PodNeed) -> tuple[float, float]:
        gpus = sum(v for k, v in pod.requests.items() if k.endswith("/gpu"))
        return (-gpus, -pod.requests.get("cpu", 0.0))

    placements = []
    for pod in sorted((p for p in pods if p.owner is not None), key=size):
        reasons = {room.name: why_not(pod, room) for room in rooms}
        target = next((room for room in rooms if not reasons[room.name]), None)
        if target is None:
            shown = [f"{name}: {why}" for name, why in reasons.items()][:_SHOWN_NODES]
            more = len(reasons) - len(shown)
            text = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
            placements.append(Placement(pod, None, text or "the cluster has no other node"))
            continue
        for name, wanted in pod.requests.items():
            target.free[name] = target.free.get(name, 0.0) - wanted
        placements.append(Placement(pod, target.name))
    return placements


def refusal(node: str, placements: Sequence[Placement], timeout_seconds: float) -> str:
    """The one-line reason to refuse the drill, or empty when every replaceable pod has somewhere to go."""
    stuck = [p for p in placements if p.node is None]
    if not stuck:
        return ""
    first = stuck[0]
    others = f" (and {len(stuck) - 1} other pod(s))" if len(stuck) > 1 else ""
    return (
        f"refusing to drill {node}: no other node could take pod {first.pod.ref} of {first.pod.owner}{others} "
        f"({first.why_not}); its replacement would stay Pending until the {timeout_seconds:g} s timeout. "
        "Add a node with room, or choose another --node"
    )


# --- remediations: the modes, the instance, the one active remediation ---------------------------


def instance_of(node: str, cluster_id: str, workers: Iterable[Any]) -> str:
    """The instance behind the Kubernetes Node ``node``: the cluster's worker node (``gpu_worker_nodes``)
    whose host name is that Node's name (:func:`~together_clusters.platform.kubernetes_node_name`)."""
    known = []
    for worker in workers:
        if not worker.host_name:
            continue
        name = kubernetes_node_name(worker.host_name)
        if name == node and worker.instance_id:
            return str(worker.instance_id)
        known.append(name)
    listed = ", ".join(sorted(known)) or "none"
    raise DrillError(
        f"node {node} is not a worker node of cluster {cluster_id} (its nodes: {listed}); is the kubeconfig "
        "that cluster's?"
    )


def active_text(active: Sequence[Any]) -> str:
    """The instance's remediation still under way, as the plan names it; empty when there is none."""
    if not active:
        return ""
    first = active[0]
    return f"{first.id} ({short_mode(first.mode or '?')}, {first.state})"


@dataclass(frozen=True)
class RemediationPlan:
    """What a remediation drill asks the compute API for."""

    mode: RemediationMode
    cluster_id: str
    instance_id: str
    api: str
    """The compute API's base URL (the emulator's, on the twin)."""
    active: str = ""
    """The instance's active remediation (:func:`active_text`); empty when it has none."""


# --- the plan ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What a drill would do, shown by ``--dry-run`` and before the confirmation."""

    context: str
    server: str
    mode: str
    """``twin`` or ``game-day`` (a preemption), or ``remediation``."""
    node: str
    termination: str
    """How the pods go: the preemption's termination mode, or the remediation's (``vm-only``...)."""
    pods: Sequence[PodNeed]
    placements: Sequence[Placement]
    watched_namespace: str | None
    grace_seconds: int
    timeout_seconds: float
    remediation: RemediationPlan | None = None
    node_gpus: float = 0.0
    """The GPUs the node offers (its allocatable): what a remediation takes out."""

    @property
    def refusal(self) -> str:
        if self.remediation is not None and self.remediation.active:
            return (
                f"refusing to drill {self.node}: its instance {self.remediation.instance_id} already has an "
                f"active remediation {self.remediation.active} (the API allows one at a time); wait for it "
                "to end, or choose another --node"
            )
        return refusal(self.node, self.placements, self.timeout_seconds)


def steps(plan: Plan) -> str:
    """What happens, in order."""
    if plan.remediation is not None:
        what = remediation_steps(plan.remediation.mode, plan.node)
        return (
            f"ask the compute API ({plan.remediation.api}) for a manual {plan.termination} remediation of "
            f"instance {plan.remediation.instance_id} (cluster {plan.remediation.cluster_id}); the platform "
            f"{what}; watch it to its end and the workloads up to {plan.timeout_seconds:g} s after it runs"
        )
    if plan.mode == "twin":
        return (
            f"the emulator preempts {plan.node}: cordon, its preemption Event, pods terminated by "
            f"{plan.termination}, the Node deleted at T+grace, a refill later"
        )
    return (
        f"cordon {plan.node}, a {LifecycleReason.PREEMPTION_NOTIFIED.value} Event on it, evict its pods (grace {plan.grace_seconds} s, "
        f"PodDisruptionBudgets respected), watch up to {plan.timeout_seconds:g} s, then uncordon it"
    )


def plan_text(plan: Plan) -> str:
    """The plan for a person, one fact a line."""
    where = {p.pod.ref: p for p in plan.placements}
    lines = [
        f"context:  {plan.context} ({plan.server})",
        f"mode:     {plan.mode}: {steps(plan)}",
        f"node:     {plan.node}",
    ]
    if plan.remediation is not None:
        lines.append(f"instance: {plan.remediation.instance_id} (cluster {plan.remediation.cluster_id})")
        lines.append(f"capacity: {capacity_text(plan.remediation.mode, plan.node_gpus)}")
        if plan.remediation.active:
            lines.append(f"active:   {plan.remediation.active}")
    if not plan.pods:
        taker = "a preemption" if plan.remediation is None else "the remediation"
        lines.append(f"pods:     none (the node runs no pod {taker} would take)")
    for i, pod in enumerate(plan.pods):
        placed = where.get(pod.ref)
        if pod.owner is None:
            fate = "a bare pod: lost, nothing replaces it"
        elif placed is not None and placed.node is not None:
            fate = f"replaced by {pod.owner}, room on {placed.node}"
        else:
            fate = f"replaced by {pod.owner}, but NO node has room ({placed.why_not if placed else '?'})"
        if plan.watched_namespace is not None and pod.namespace != plan.watched_namespace:
            fate += f"; not watched (outside -n {plan.watched_namespace})"
        lines.append(f"{'pods:' if i == 0 else '':<10}{pod.ref}: {fate}")
    check = plan.refusal
    if not check:
        lines.append("check:    every replacement has a node with room")
    elif plan.mode == "twin":
        # The twin plays the platform, whose refill may bring the node the replacement needs.
        lines.append(f"check:    no node has room now, the emulator's refill may bring one: {check}")
    else:
        lines.append(f"check:    refused: {check}")
    return "\n".join(lines) + "\n"


def read_plan(
    core: Any,
    *,
    context: str,
    server: str,
    mode: str,
    node: str,
    termination: str,
    watched_namespace: str | None,
    grace_seconds: int,
    timeout_seconds: float,
    remediation: RemediationPlan | None = None,
) -> Plan:
    """Read the live nodes and pods once and lay out the drill of ``node`` (nothing is changed)."""
    serialize = _serializer()
    nodes = [serialize(n) for n in core.list_node(_request_timeout=_TIMEOUT).items]
    pods = [serialize(p) for p in core.list_pod_for_all_namespaces(_request_timeout=_TIMEOUT).items]
    by_node: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        by_node.setdefault((pod.get("spec") or {}).get("nodeName") or "", []).append(pod)
    taken = [
        pod_need(p)
        for p in by_node.get(node, [])
        if (p.get("status") or {}).get("phase") not in _TERMINAL
        and not (p.get("metadata") or {}).get("deletionTimestamp")
        and not is_daemon(p)
    ]
    others = [
        node_room(n, by_node.get(n["metadata"]["name"], [])) for n in nodes if n["metadata"]["name"] != node
    ]
    allocatable = next(
        ((n.get("status") or {}).get("allocatable") or {} for n in nodes if n["metadata"]["name"] == node), {}
    )
    gpus = sum(float(parse_quantity(v)) for k, v in allocatable.items() if k.endswith("/gpu"))
    return Plan(
        context=context,
        server=server,
        mode=mode,
        node=node,
        termination=termination,
        pods=sorted(taken, key=lambda p: p.ref),
        placements=place(taken, others),
        watched_namespace=watched_namespace,
        grace_seconds=grace_seconds,
        timeout_seconds=timeout_seconds,
        remediation=remediation,
        node_gpus=gpus,
    )


def _serializer() -> Callable[[Any], dict[str, Any]]:
    """The client's models as the API writes them (camelCase); plain dicts pass through."""
    from kubernetes import client

    return client.ApiClient().sanitize_for_serialization  # type: ignore[no-any-return]


# --- asking --------------------------------------------------------------------------------------


def confirm(plan: Plan, stdin: TextIO, stderr: TextIO) -> None:
    """Show the plan and ask; a ``DrillError`` unless the answer is yes. A stdin that is not a terminal
    (CI, a pipe) cannot answer: that is an error naming ``--yes``."""
    if not stdin.isatty():
        raise DrillError(
            f"the drill would act on kubeconfig context {plan.context} ({plan.server}) and stdin is not a "
            "terminal to confirm it: give --yes (or --dry-run to see the plan)"
        )
    stderr.write(plan_text(plan))
    if plan.remediation is None:
        stderr.write(f"Preempt node {plan.node} in context {plan.context}? [y/N] ")
    else:
        stderr.write(
            f"Remediate node {plan.node} (instance {plan.remediation.instance_id}, {plan.termination}) in "
            f"context {plan.context}? [y/N] "
        )
    stderr.flush()
    answer = stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise DrillError(f"not confirmed (answer {answer or 'empty'}): nothing was changed")
