"""The drills: preempt one preemptible node, or ask the compute API to remediate one node (of either class),
then watch the workloads it ran and report what became of them (what each mode does: see
:data:`together_clusters.cli.drill.command.DESCRIPTION`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from together_clusters.errors import DrillError
from together_clusters.platform import (
    COMPUTE_CLASS_LABEL,
    GRACE_PERIOD_LIMIT_SECONDS,
    JOBSET_API,
    PREEMPTIBLE,
    TerminationMode,
)
from together_clusters.platform.objects import condition, condition_true
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.errors import ConflictError
from together_clusters.provider.vocabulary import RemediationMode
from together_clusters.sequences import preemption
from together_clusters.sequences.preemption import PREEMPTED_AT_ANNOTATION

from .modes import NODE_KEEPING_MODES, short_mode
from .report import DrillReport, Outcome, RemediationReport, Resumed, WorkloadReport, parse_resumed

_TIMEOUT = 10
_POLL_SECONDS = 0.5
_ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "AUTO_RESOLVED"})
"""The states a remediation ends in."""
_TAKING = frozenset({"RUNNING", "SUCCEEDED", "FAILED"})
"""The states from which the node's pods may have been taken (a failed repair may have drained them)."""
REMEDIATION_REASON = "together-clusters drill"
"""The ``reason`` of the remediations a drill asks for: who asked, in the API's listing."""


@dataclass(frozen=True)
class RemediationTarget:
    """What a remediation drill asks the compute API for (the instance behind the drilled node)."""

    mode: RemediationMode
    cluster_id: str
    instance_id: str
    poll_seconds: float = 5.0
    """How often to read the remediation's state (the twin's clock runs fast: poll it more often)."""
    timeout_seconds: float = 3600.0
    """How long to wait for the remediation to end (a real power cycle takes about 20 minutes)."""


@dataclass(frozen=True)
class DrillArgs:
    node: str | None = None
    """The preemptible node to reclaim; ``None``: the first (the oldest, as the platform picks)."""
    twin_url: str | None = None
    """The emulator's base URL: preempt through its admin API. ``None``: a game day on a real cluster."""
    termination: TerminationMode = TerminationMode.EVICTION
    """How pods are terminated (twin only; a game day evicts, as a node termination handler does)."""
    grace_seconds: int = GRACE_PERIOD_LIMIT_SECONDS
    """Game day: the most a pod gets after SIGTERM (capped at the platform's 300 s)."""
    timeout_seconds: float = 900.0
    """How long to wait for replacements before a workload counts as not replaced."""
    log_wait_seconds: float = 60.0
    """How long to wait for a replacement's ``resumed step=`` line once it runs."""
    namespace: str | None = None
    """Watch and report only this namespace's workloads; ``None``: every workload that had pods on the node."""
    remediation: RemediationTarget | None = None
    """A remediation drill (:func:`run_remediation_drill`): the mode and instance to ask for."""


@dataclass(frozen=True)
class Workload:
    kind: str
    namespace: str
    name: str
    api_version: str


@dataclass
class _Watched:
    workload: Workload
    lost: set[str]
    before: set[str] = field(default_factory=set)
    """The workload's pods that had started by T+0 (the lost ones too): none of them is a replacement.
    A pod still Pending then (a trial waiting for a node) counts once it runs: it restores the capacity."""
    replaced_after: float | None = None
    replacements: list[Any] = field(default_factory=list)
    outcome: Outcome | None = None
    detail: str = ""


# --- which node, which workloads ------------------------------------------------------------------


def _healthy_preemptible(core: client.CoreV1Api) -> list[Any]:
    nodes = core.list_node(label_selector=f"{COMPUTE_CLASS_LABEL}={PREEMPTIBLE}", _request_timeout=_TIMEOUT)
    healthy = [n for n in nodes.items if n.spec is None or not n.spec.unschedulable]
    return sorted(healthy, key=lambda n: (n.metadata.creation_timestamp, _natural(n.metadata.name)))


def _natural(name: str) -> tuple[str, int]:
    """``pool-9`` before ``pool-10``, as the platform numbers its nodes."""
    stem, _, number = name.rpartition("-")
    return (stem, int(number)) if number.isdigit() else (name, -1)


def choose_node(core: client.CoreV1Api, wanted: str | None) -> str:
    """The node to preempt: ``wanted`` if it is a healthy preemptible node, else the oldest one."""
    names = [n.metadata.name for n in _healthy_preemptible(core)]
    if not names:
        raise DrillError(
            f"no schedulable node labelled {COMPUTE_CLASS_LABEL}={PREEMPTIBLE}: nothing to preempt"
        )
    if wanted is None:
        return names[0]
    if wanted not in names:
        raise DrillError(
            f"--node {wanted} is not a schedulable preemptible node; choose one of: {', '.join(names)}"
        )
    return wanted


def _healthy_any_class(core: client.CoreV1Api) -> list[Any]:
    """Schedulable nodes of either compute class: the preemptible ones first (oldest first), then the
    standard ones."""
    nodes = core.list_node(label_selector=COMPUTE_CLASS_LABEL, _request_timeout=_TIMEOUT)
    healthy = [n for n in nodes.items if n.spec is None or not n.spec.unschedulable]
    return sorted(
        healthy,
        key=lambda n: (
            (n.metadata.labels or {}).get(COMPUTE_CLASS_LABEL) != PREEMPTIBLE,
            n.metadata.creation_timestamp,
            _natural(n.metadata.name),
        ),
    )


def choose_remediation_node(core: client.CoreV1Api, wanted: str | None) -> str:
    """The node to remediate: ``wanted`` if it is a schedulable node of either class, else the one the
    preemption drill would pick (the oldest preemptible node), else the oldest standard node."""
    names = [n.metadata.name for n in _healthy_any_class(core)]
    if not names:
        raise DrillError(f"no schedulable node labelled {COMPUTE_CLASS_LABEL}: nothing to remediate")
    if wanted is None:
        return names[0]
    if wanted not in names:
        raise DrillError(
            f"--node {wanted} is not a schedulable node of the cluster's GPU pools; choose one of: "
            f"{', '.join(names)}"
        )
    return wanted


class _Owners:
    """Resolves a pod to the workload at the top of its owner chain (cached per owner)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._apps = client.AppsV1Api(api)
        self._batch = client.BatchV1Api(api)
        self._cache: dict[tuple[str, str, str], Workload] = {}

    def of(self, pod: Any) -> Workload | None:
        namespace = pod.metadata.namespace
        ref = _controller(pod.metadata.owner_references)
        if ref is None:
            return None  # a bare pod: nothing will replace it, and the drill does not pretend otherwise
        return self._top(namespace, ref)

    def _top(self, namespace: str, ref: Any) -> Workload:
        key = (namespace, ref.kind, ref.name)
        if key in self._cache:
            return self._cache[key]
        readers: dict[str, Callable[..., Any]] = {
            "ReplicaSet": self._apps.read_namespaced_replica_set,
            "Job": self._batch.read_namespaced_job,
        }
        top = Workload(ref.kind, namespace, ref.name, ref.api_version)
        reader = readers.get(ref.kind)
        if reader is not None:
            try:
                owner = _controller(
                    reader(ref.name, namespace, _request_timeout=_TIMEOUT).metadata.owner_references
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                # Gone for now: a JobSet restart deletes its Job and creates one of the same name. Not
                # cached, so the new Job's pods resolve to the JobSet again.
                return top
            if owner is not None:
                top = self._top(namespace, owner)
        self._cache[key] = top
        return top


def _controller(refs: list[Any] | None) -> Any:
    return next((r for r in refs or [] if r.controller), None)


def _lost_pods(api: client.ApiClient, owners: _Owners, node: str) -> dict[Workload, set[str]]:
    """The node's pods that a preemption takes, by workload (DaemonSet pods stay, as a drain leaves them)."""
    lost: dict[Workload, set[str]] = {}
    for pod in preemption.pods_to_terminate(client.CoreV1Api(api), node, TerminationMode.EVICTION):
        workload = owners.of(pod)
        if workload is not None and workload.kind != "DaemonSet":
            lost.setdefault(workload, set()).add(str(pod.metadata.uid))  # type: ignore[union-attr]
    return lost


# --- the two ways to preempt ----------------------------------------------------------------------


def preempt_on_twin(twin_url: str, node: str, termination: TerminationMode) -> None:
    """Preempt exactly ``node`` through the emulator's admin API (the platform's own pick, the oldest node,
    could be another one than the drill watches)."""
    with httpx.Client(base_url=twin_url.rstrip("/"), timeout=30) as http:
        found = http.get(f"/_emulator/kubernetes/nodes/{node}")
        if found.status_code == 404:
            raise DrillError(f"node {node} belongs to no cluster of the emulator at {twin_url}")
        found.raise_for_status()
        owner, node_id = found.json()["cluster_id"], found.json()["node_id"]
        reply = http.post(
            "/_emulator/kubernetes/preempt",
            json={"cluster_id": owner, "node_ids": [node_id], "termination": termination.value},
        )
        if reply.status_code != 200:
            raise DrillError(f"the emulator refused the preemption: HTTP {reply.status_code} {reply.text}")
        taken = reply.json()["preempted_nodes"]
        if taken != [node]:
            raise DrillError(f"the emulator preempted {taken} instead of {node}")


def await_cordon(core: client.CoreV1Api, node: str, timeout_seconds: float = 60.0) -> None:
    """Wait until the twin has played T+0 on the Node (cordoned, or already gone): the emulator cordons its
    record at once and the Node on its next pass, and a drill that returned in between would leave the node
    looking schedulable (the next drill could pick it again)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            found = core.read_node(node, _request_timeout=_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        if found.spec is not None and found.spec.unschedulable:
            return
        if time.monotonic() >= deadline:
            raise DrillError(
                f"the emulator preempted {node} but did not cordon it within {timeout_seconds:g}s"
            )
        time.sleep(_POLL_SECONDS / 5)


def announce_game_day(core: client.CoreV1Api, node: str, grace_seconds: int) -> None:
    """T+0 of a game day: cordon and the ``TogetherPreemptionNotified`` Event, as the platform records them."""
    message = (
        f"Game day: node {node} is being preempted (drill): cordoned, pods have {grace_seconds}s to "
        "terminate; the node is uncordoned afterwards instead of deleted"
    )
    preemption.announce(core, node, time.time(), message)


def evict_remaining(core: client.CoreV1Api, node: str, grace_seconds: int) -> None:
    """One eviction pass; pods a PodDisruptionBudget protects are tried again on the next pass."""
    for pod in preemption.pods_to_terminate(core, node, TerminationMode.EVICTION):
        preemption.terminate(core, pod, TerminationMode.EVICTION, grace_seconds)


def uncordon(core: client.CoreV1Api, node: str) -> None:
    """Give the node back (and drop the drill's mark, so a real preemption later is played in full)."""
    body = {"spec": {"unschedulable": None}, "metadata": {"annotations": {PREEMPTED_AT_ANNOTATION: None}}}
    try:
        core.patch_node(node, body, _request_timeout=_TIMEOUT)
    except ApiException as exc:
        if exc.status != 404:
            raise


# --- watching ------------------------------------------------------------------------------------


def _finished(api: client.ApiClient, w: Workload) -> tuple[Outcome, str] | None:
    """A terminal state of the workload's own controller, when it has one (Jobs and JobSets)."""
    obj: Any
    if w.kind == "Job":
        job = client.BatchV1Api(api).read_namespaced_job_status(
            w.name, w.namespace, _request_timeout=_TIMEOUT
        )
        obj = api.sanitize_for_serialization(job)  # the API's JSON, as the platform's condition reads it
    elif w.kind == JOBSET_API.kind:
        group, version = w.api_version.split("/")
        obj = client.CustomObjectsApi(api).get_namespaced_custom_object_status(
            group, version, w.namespace, JOBSET_API.plural, w.name, _request_timeout=_TIMEOUT
        )
    else:
        readers = {
            "Deployment": client.AppsV1Api(api).read_namespaced_deployment,
            "StatefulSet": client.AppsV1Api(api).read_namespaced_stateful_set,
            "ReplicaSet": client.AppsV1Api(api).read_namespaced_replica_set,
        }
        if w.kind in readers:
            readers[w.kind](w.name, w.namespace, _request_timeout=_TIMEOUT)  # a 404 ends the watch
        return None
    if condition_true(obj, "Failed"):
        failed = condition(obj, "Failed") or {}
        return Outcome.FAILED, f"{failed.get('reason')}: {failed.get('message')}"
    if any(condition_true(obj, done) for done in ("Complete", "Completed")):
        return Outcome.SURVIVED, "completed"
    return None


def _pods_by_workload(core: client.CoreV1Api, owners: _Owners, namespace: str) -> dict[Workload, list[Any]]:
    by_workload: dict[Workload, list[Any]] = {}
    for pod in core.list_namespaced_pod(namespace, _request_timeout=_TIMEOUT).items:
        workload = owners.of(pod)
        if workload is not None:
            by_workload.setdefault(workload, []).append(pod)
    return by_workload


def _note_pods_before(api: client.ApiClient, owners: _Owners, watched: list[_Watched]) -> None:
    """Remember the pods each workload has started before the preemption: its other replicas (a
    Deployment's, a Sweep's running trials) are not replacements of the pods it loses."""
    core = client.CoreV1Api(api)
    for namespace in {w.workload.namespace for w in watched}:
        by_workload = _pods_by_workload(core, owners, namespace)
        for w in watched:
            if w.workload.namespace == namespace:
                started = {
                    str(p.metadata.uid)
                    for p in by_workload.get(w.workload, [])
                    if p.status is None or p.status.phase != "Pending"
                }
                w.before = w.lost | started


def _tick(
    api: client.ApiClient,
    owners: _Owners,
    node: str,
    watched: list[_Watched],
    started: float,
    same_node_ok: bool = False,
) -> None:
    """One look at the watched workloads: which failed, completed or got a Running replacement for every
    lost pod (elsewhere, unless ``same_node_ok``: a rebooted node is back)."""
    core = client.CoreV1Api(api)
    for namespace in {w.workload.namespace for w in watched if w.outcome is None}:
        by_workload = _pods_by_workload(core, owners, namespace)
        for w in watched:
            if w.outcome is not None or w.workload.namespace != namespace:
                continue
            try:
                finished = _finished(api, w.workload)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                finished = (Outcome.FAILED, "the workload was deleted during the drill")
            if finished is not None and finished[0] is Outcome.FAILED:
                w.outcome, w.detail = finished
                continue
            unscheduled = [
                _unschedulable(p) for p in by_workload.get(w.workload, []) if p.metadata.uid not in w.before
            ]
            w.detail = next((why for why in unscheduled if why), "")
            fresh = [
                p
                for p in by_workload.get(w.workload, [])
                if p.metadata.uid not in w.before
                and p.status.phase == "Running"
                and p.metadata.deletion_timestamp is None
                and (same_node_ok or p.spec.node_name != node)
                and p.metadata.creation_timestamp is not None
            ]
            if len(fresh) >= len(w.lost) and w.replaced_after is None:
                w.replaced_after = time.monotonic() - started
                w.replacements = fresh
                w.outcome = Outcome.SURVIVED
            elif finished is not None:
                w.outcome, w.detail = finished


def _unschedulable(pod: Any) -> str:
    """Why the scheduler cannot place a pending pod (no capacity left is a real outcome of a preemption)."""
    if pod.status.phase != "Pending":
        return ""
    for c in pod.status.conditions or []:
        if c.type == "PodScheduled" and c.status == "False":
            return f"replacement {pod.metadata.name} unschedulable: {c.message or c.reason}"
    return ""


def _resumed(core: client.CoreV1Api, pods: list[Any], wait_seconds: float) -> tuple[Resumed | None, str]:
    """The step the replacements resumed from (the lowest, when they disagree), read from their logs."""
    deadline = time.monotonic() + wait_seconds
    pending = {(p.metadata.namespace, p.metadata.name): p for p in pods}
    found: list[Resumed] = []
    refused: ApiException | None = None
    while pending:
        refused = None
        for key, pod in list(pending.items()):
            try:
                main = pod.spec.containers[0].name  # the main container comes first in every component
                log = core.read_namespaced_pod_log(key[1], key[0], container=main, _request_timeout=_TIMEOUT)
            except ApiException as exc:
                # A kubelet refuses the log of a container that is still starting (HTTP 400, "waiting to
                # start"): try again within the wait, as for a line not written yet.
                refused = exc
                continue
            resumed = parse_resumed(log or "")
            if resumed is not None:
                found.append(resumed)
                pending.pop(key)
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    if not found and refused is not None:
        why = f"HTTP {refused.status}: {refused.reason}" if refused.reason else f"HTTP {refused.status}"
        return None, f"no pod log ({why}; the twin's simulated pods write none)"
    if not found:
        return None, "no 'resumed step=' line in the log (started fresh, or no checkpoint runtime)"
    steps = {r.step for r in found}
    lowest = min(found, key=lambda r: r.step)
    return lowest, "" if len(steps) == 1 else f"replacements resumed from different steps {sorted(steps)}"


def _watched(api: client.ApiClient, owners: _Owners, node: str, namespace: str | None) -> list[_Watched]:
    """The workloads that have pods the drill takes on ``node`` (in ``namespace`` only, when given)."""
    watched = [
        _Watched(w, lost)
        for w, lost in _lost_pods(api, owners, node).items()
        if namespace is None or w.namespace == namespace
    ]
    _note_pods_before(api, owners, watched)
    return watched


def _reports(
    core: client.CoreV1Api, watched: list[_Watched], args: DrillArgs, progress: Callable[[str], None]
) -> tuple[WorkloadReport, ...]:
    reports = []
    for w in watched:
        resumed, note = None, w.detail
        if w.outcome is None:
            waited = f"no replacement Running within {args.timeout_seconds:g}s"
            w.outcome, note = Outcome.NOT_REPLACED, f"{waited}; {w.detail}" if w.detail else waited
        elif w.replacements:
            resumed, note = _resumed(core, w.replacements, args.log_wait_seconds)
        progress(f"drill: {w.workload.kind}/{w.workload.name} {w.outcome.value}")
        reports.append(
            WorkloadReport(
                kind=w.workload.kind,
                namespace=w.workload.namespace,
                name=w.workload.name,
                pods_lost=len(w.lost),
                outcome=w.outcome,
                seconds_to_replacement=None if w.replaced_after is None else round(w.replaced_after, 1),
                resumed=resumed,
                detail=note,
            )
        )
    return tuple(reports)


def run_drill(api: client.ApiClient, args: DrillArgs, progress: Callable[[str], None] = print) -> DrillReport:
    """Preempt one node and report what became of every workload it ran."""
    core = client.CoreV1Api(api)
    node = choose_node(core, args.node)
    owners = _Owners(api)
    watched = _watched(api, owners, node, args.namespace)
    grace = min(args.grace_seconds, GRACE_PERIOD_LIMIT_SECONDS)
    termination = args.termination if args.twin_url else TerminationMode.EVICTION
    progress(f"drill: preempting {node} ({termination.value}); {len(watched)} workload(s) had pods there")
    started = time.monotonic()
    if args.twin_url:
        preempt_on_twin(args.twin_url, node, termination)
        await_cordon(core, node)
    else:
        announce_game_day(core, node, grace)
    try:
        deadline = started + args.timeout_seconds
        while any(w.outcome is None for w in watched) and time.monotonic() < deadline:
            if not args.twin_url and time.monotonic() < started + grace:
                evict_remaining(core, node, grace)
            _tick(api, owners, node, watched, started)
            time.sleep(_POLL_SECONDS)
    finally:
        if not args.twin_url:
            uncordon(core, node)
    reports = _reports(core, watched, args, progress)
    mode = "twin" if args.twin_url else "game-day"
    return DrillReport(mode=mode, node=node, termination=termination.value, workloads=reports)


# --- the remediation drill -----------------------------------------------------------------------


def _untouched(core: client.CoreV1Api, owners: _Owners, w: _Watched) -> bool:
    """Whether every pod the workload was to lose still runs, not terminating (a repair that ended before
    it ran took nothing)."""
    pods = _pods_by_workload(core, owners, w.workload.namespace).get(w.workload, [])
    alive = {str(p.metadata.uid) for p in pods if p.metadata.deletion_timestamp is None}
    return w.lost <= alive


def run_remediation_drill(
    api: client.ApiClient,
    compute: TogetherClient,
    args: DrillArgs,
    progress: Callable[[str], None] = print,
) -> DrillReport:
    """Ask the compute API to remediate one node's instance, follow the remediation to its end and report
    what became of every workload the node ran (``report.remediation`` says how the remediation ended).

    T+0 is the request. The workloads are watched until each lost pod has a Running replacement, the
    workload completes or fails, or ``timeout_seconds`` after the remediation was first seen taking the
    node's pods (a repair waits in PENDING and quarantine first, with its pods still running)."""
    target = args.remediation
    if target is None:
        raise DrillError("a remediation drill needs the mode and the instance to remediate")
    core = client.CoreV1Api(api)
    node = choose_remediation_node(core, args.node)
    owners = _Owners(api)
    watched = _watched(api, owners, node, args.namespace)
    mode = short_mode(target.mode)
    progress(
        f"drill: asking for a {mode} remediation of {node} (instance {target.instance_id}); "
        f"{len(watched)} workload(s) had pods there"
    )
    started = time.monotonic()
    try:
        remediation = compute.create_remediation(
            target.cluster_id, target.instance_id, target.mode, reason=REMEDIATION_REASON
        )
    except ConflictError as exc:
        raise DrillError(
            f"the API refused a remediation of instance {target.instance_id} (node {node}): {exc}"
        ) from None
    rem_id = str(remediation.id)
    state = str(remediation.state)
    states = [state]
    progress(f"drill: remediation {rem_id} {state}")
    read_at = started
    taken_at = started if state in _TAKING or state in _ENDED else None
    same_node_ok = target.mode in NODE_KEEPING_MODES
    while True:
        now = time.monotonic()
        if state not in _ENDED and now - read_at >= target.poll_seconds:
            remediation = compute.get_remediation(target.cluster_id, target.instance_id, rem_id)
            read_at = now
            if remediation.state != state:
                state = str(remediation.state)
                states.append(state)
                progress(f"drill: remediation {rem_id} {state} (T+{now - started:.1f}s)")
            if taken_at is None and (state in _TAKING or state in _ENDED):
                # An end without RUNNING (cancelled, auto-resolved) starts the workloads' clock too, so a
                # workload that lost a pod some other way does not hold the drill forever.
                taken_at = now
        undecided = [w for w in watched if w.outcome is None]
        if undecided:
            _tick(api, owners, node, watched, started, same_node_ok=same_node_ok)
            if state in _ENDED and state != "SUCCEEDED":
                for w in undecided:
                    if w.outcome is None and _untouched(core, owners, w):
                        w.outcome = Outcome.SURVIVED
                        w.detail = f"untouched: the remediation ended {state} before taking its pods"
        workloads_done = all(w.outcome is not None for w in watched) or (
            taken_at is not None and now >= taken_at + args.timeout_seconds
        )
        if state in _ENDED and workloads_done:
            break
        if state not in _ENDED and now >= started + target.timeout_seconds:
            raise DrillError(
                f"remediation {rem_id} of {node} is still {state} after {target.timeout_seconds:g}s; the drill "
                "stops watching (the platform goes on with it)"
            )
        time.sleep(_POLL_SECONDS)
    reports = _reports(core, watched, args, progress)
    outcome = RemediationReport(
        id=rem_id,
        mode=mode,
        cluster_id=target.cluster_id,
        instance_id=target.instance_id,
        state=state,
        states=tuple(states),
        error_message=remediation.error_message or "",
    )
    return DrillReport(
        mode="remediation", node=node, termination=mode, workloads=reports, remediation=outcome
    )
