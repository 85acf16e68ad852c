"""The remediation gate: drain a node the way its workloads survive, then approve its remediation through the
compute API (:mod:`.plan` decides, :mod:`.cluster` touches Kubernetes, this module runs the sequence).

One approval, restart-safe at every step:

1. find the remediation (by id, over the cluster's instances) and the Node behind its instance
   (:func:`~together_clusters.platform.kubernetes_node_name` of the worker node's host name);
2. refuse unless it awaits approval;
3. plan the drain (or take the plan a gate recorded on the Node before it died), cordon the Node with the
   plan recorded on it;
4. evict through the Eviction API, again while a PodDisruptionBudget refuses, and wait until no pod of the
   drain runs on the node any more (checkpoint written) and each workload runs or is queued elsewhere;
5. approve. A gate that dies anywhere before this leaves the node cordoned and the remediation pending: run
   again, it finds the plan on the Node and goes on.

When a remediation ends leaving the node in place (a reboot or power cycle that succeeded, one that failed,
was rejected or cancelled), :func:`release_ended` uncordons the node the gate cordoned; ``remediations
list``, ``reject`` and the unattended gate call it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kubernetes import client as k8s

from together_clusters.errors import GateError
from together_clusters.platform import (
    NODE_KEEPING_REMEDIATION_MODES,
    REMEDIATION_GATE_ANNOTATION,
    kubernetes_node_name,
)
from together_clusters.platform import remediation_mode_name as short_mode
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.models import Cluster, Remediation
from together_clusters.provider.vocabulary import ACTIVE_REMEDIATION_STATES
from together_clusters.sequences import preemption

from . import cluster as kube
from .plan import AWAITING_APPROVAL, DrainPlan, Progress, at_risk, progress

Clock = Callable[[], float]


@dataclass(frozen=True)
class Target:
    """A remediation and the Kubernetes Node it repairs (``None``: its instance has no Node now)."""

    remediation: Remediation
    node: str | None


@dataclass(frozen=True)
class GateOptions:
    """How one approval runs."""

    timeout_seconds: float = 900.0
    poll_seconds: float = 0.5
    comment: str | None = None
    force: bool = False


@dataclass
class Outcome:
    """What one approval did: the plan, where each workload went, the approval (``None``: not approved)."""

    target: Target
    plan: DrainPlan | None
    progress: Progress | None = None
    approved: Remediation | None = None
    at_risk: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)


def node_of(found: Cluster, remediation: Remediation) -> str | None:
    """The Kubernetes Node of the remediation's instance: the worker node with that instance id, by its host
    name; the remediation's ``instance_name`` when the listing lacks it. ``None`` when neither names one."""
    for node in found.gpu_worker_nodes:
        if node.instance_id and node.instance_id == remediation.instance_id and node.host_name:
            return kubernetes_node_name(node.host_name)
    if remediation.instance_name:
        return kubernetes_node_name(remediation.instance_name)
    return None


def find(api: TogetherClient, cluster_id: str, remediation_id: str) -> Target:
    """The remediation ``remediation_id`` of the cluster (any instance) and its Node."""
    for remediation in api.list_remediations(cluster_id, "-"):
        if remediation.id == remediation_id:
            return Target(remediation, node_of(api.get_cluster(cluster_id), remediation))
    raise GateError(
        f"remediation {remediation_id} is not one of cluster {cluster_id}'s; "
        "list them with: together-clusters remediations list"
    )


def active(api: TogetherClient, cluster_id: str) -> list[Target]:
    """Every remediation of the cluster that has not ended, with its Node, oldest first."""
    found = api.get_cluster(cluster_id)
    remediations = api.list_remediations(cluster_id, "-", states=list(ACTIVE_REMEDIATION_STATES))
    ordered = sorted(remediations, key=lambda r: (r.create_time is None, r.create_time, r.id))
    return [Target(r, node_of(found, r)) for r in ordered]


def _require_awaiting(target: Target) -> None:
    state = target.remediation.state
    if state != AWAITING_APPROVAL:
        raise GateError(
            f"remediation {target.remediation.id} is {state}, not {AWAITING_APPROVAL}: only a remediation awaiting "
            "approval can be approved or rejected"
        )


def plan_for(kube_api: k8s.ApiClient, target: Target) -> DrainPlan | None:
    """The drain for ``target`` (``None``: its Node is gone: nothing on it to drain)."""
    node = None if target.node is None else kube.read_node(k8s.CoreV1Api(kube_api), target.node)
    if node is None:
        return None
    return kube.read_plan(kube_api, str(target.remediation.id), node)


def approve(
    api: TogetherClient,
    kube_api: k8s.ApiClient,
    target: Target,
    options: GateOptions,
    report: Callable[[str], None],
    clock: Clock = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Drain the node of ``target`` and approve its remediation once the drain holds (at once with
    ``options.force``, naming what is at risk). Raises :class:`GateError` on a timeout, leaving the node
    cordoned and the remediation pending."""
    _require_awaiting(target)
    rem = target.remediation
    plan = plan_for(kube_api, target)
    outcome = Outcome(target, plan)
    core = k8s.CoreV1Api(kube_api)
    if plan is not None:
        kube.cordon(core, plan)
        report(
            f"node {plan.node} cordoned for remediation {rem.id} ({short_mode(rem.mode)}); "
            f"{len(plan.pods)} pod(s) to drain of {len(plan.workloads)} workload(s)"
        )
        if options.force:
            outcome.at_risk = at_risk(plan, kube.pods_on(core, plan.node))
            if outcome.at_risk:
                report(f"warning: --force approves now; at risk: {', '.join(outcome.at_risk)}")
        else:
            outcome.progress = _drain(api, kube_api, plan, options, report, clock, sleep)
    else:
        outcome.notes.append("no Kubernetes Node for this instance now: nothing to drain")
    # Read again right before approving: someone may have rejected or cancelled it meanwhile.
    current = api.get_remediation(str(rem.cluster_id), str(rem.instance_id), str(rem.id))
    _require_awaiting(Target(current, target.node))
    outcome.approved = api.approve_remediation(
        str(rem.cluster_id), str(rem.instance_id), str(rem.id), comment=options.comment
    )
    report(f"remediation {rem.id} approved: now {outcome.approved.state}")
    if plan is not None and rem.mode in NODE_KEEPING_REMEDIATION_MODES:
        outcome.notes.append(
            f"node {plan.node} stays cordoned until the repair ends; then the next remediations list, reject or "
            "gate pass uncordons it"
        )
    return outcome


def _drain(
    api: TogetherClient,
    kube_api: k8s.ApiClient,
    plan: DrainPlan,
    options: GateOptions,
    report: Callable[[str], None],
    clock: Clock,
    sleep: Callable[[float], None],
) -> Progress:
    core = k8s.CoreV1Api(kube_api)
    deadline = clock() + options.timeout_seconds
    said = ""
    while True:
        # One listing of the node's pods per pass: what to evict, and what still runs there.
        on_node = preemption.pods_on(core, plan.node)
        refused = kube.evict(core, plan, on_node)
        now = progress(plan, [kube.as_json(p) for p in on_node], kube.workload_states(kube_api, plan))
        if now.done:
            return now
        line = now.waiting_for()
        if refused:
            line += (
                "; evictions refused by a PodDisruptionBudget or a namespace being deleted (retrying): "
                + ", ".join(refused)
            )
        if line != said:
            report(f"waiting: {line}")
            said = line
        if clock() >= deadline:
            raise GateError(
                f"not approved: after {options.timeout_seconds:.0f}s still waiting for {line}; node {plan.node} "
                f"stays cordoned and remediation {plan.remediation_id} pending: run approve again to go on, "
                "or --force"
            )
        sleep(options.poll_seconds)


def reject(
    api: TogetherClient, kube_api: k8s.ApiClient | None, target: Target, comment: str | None
) -> Remediation:
    """Reject the remediation (it ends CANCELLED) and lift the gate's cordon of its node, if any."""
    _require_awaiting(target)
    rem = target.remediation
    rejected = api.reject_remediation(str(rem.cluster_id), str(rem.instance_id), str(rem.id), comment=comment)
    if kube_api is not None and target.node is not None:
        kube.uncordon(k8s.CoreV1Api(kube_api), target.node)
    return rejected


def release_ended(api: TogetherClient, kube_api: k8s.ApiClient, cluster_id: str) -> list[str]:
    """Uncordon every Node the gate cordoned whose remediation no longer holds it: ended leaving the node in
    place (a reboot or power cycle that succeeded, a repair that failed, was rejected or cancelled). A node
    whose remediation is still active stays cordoned. The nodes uncordoned."""
    core = k8s.CoreV1Api(kube_api)
    released = []
    holding: set[str] | None = None  # the remediations not ended, listed once, when a gate's node needs it
    for node in core.list_node(_request_timeout=30).items:
        meta = node.metadata
        annotations = (meta.annotations if meta is not None else None) or {}
        if REMEDIATION_GATE_ANNOTATION not in annotations:
            continue
        plan = kube.recorded_plan(kube.as_json(node))
        if plan is not None:
            if holding is None:
                active = api.list_remediations(cluster_id, "-", states=list(ACTIVE_REMEDIATION_STATES))
                holding = {str(r.id) for r in active}
            if plan.remediation_id in holding:
                continue
        if kube.uncordon(core, str(meta.name)):  # type: ignore[union-attr]
            released.append(str(meta.name))  # type: ignore[union-attr]
    return released


def approvable(targets: Sequence[Target], modes: frozenset[str]) -> list[Target]:
    """The automated remediations awaiting approval in one of ``modes`` (the unattended gate's work)."""
    return [
        t
        for t in targets
        if t.remediation.state == AWAITING_APPROVAL
        and t.remediation.trigger == "REMEDIATION_TRIGGER_AUTOMATED"
        and t.remediation.mode in modes
    ]
