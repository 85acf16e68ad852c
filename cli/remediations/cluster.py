"""What the remediation gate reads from and does to a cluster's Kubernetes API: the node's pods and their
workloads, the cordon that carries the drain's plan, the evictions (the shell of :mod:`.plan`).

Needs the Kubernetes client (the ``remediations`` extra); loaded only when a command runs.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from together_clusters.components.checkpoint import contract
from together_clusters.platform import (
    GRACE_PERIOD_LIMIT_SECONDS,
    JOBSET_API,
    REMEDIATION_GATE_ANNOTATION,
    TerminationMode,
)
from together_clusters.platform.objects import condition_true
from together_clusters.sequences import preemption

from .plan import (
    DrainedPod,
    DrainPlan,
    WorkloadRef,
    WorkloadState,
    controller_of,
    drain_plan,
    runs_checkpoint_runtime,
)

_TIMEOUT = 30
CHECKPOINT_CONTRACT_ENV = (contract.ENV_BACKEND, contract.ENV_DIR, contract.ENV_S3_BUCKET)
"""A container given any of these runs the checkpoint runtime (the components set them)."""


def as_json(obj: Any) -> Any:
    """A client model as the API writes it (camelCase); plain data passes through."""
    return client.ApiClient().sanitize_for_serialization(obj)


class Owners:
    """A pod's workload: the top of its owner chain (a Job's JobSet, a ReplicaSet's Deployment), cached."""

    def __init__(self, api: client.ApiClient) -> None:
        self._apps = client.AppsV1Api(api)
        self._batch = client.BatchV1Api(api)
        self._cache: dict[tuple[str, str, str], WorkloadRef] = {}

    def of(self, pod: Mapping[str, Any]) -> WorkloadRef | None:
        ref = controller_of(pod)
        if ref is None:
            return None
        return self._top(str((pod.get("metadata") or {}).get("namespace")), ref)

    def _top(self, namespace: str, ref: Mapping[str, Any]) -> WorkloadRef:
        kind, name = str(ref.get("kind")), str(ref.get("name"))
        key = (namespace, kind, name)
        if key in self._cache:
            return self._cache[key]
        top = WorkloadRef(kind, namespace, name)
        readers = {
            "ReplicaSet": self._apps.read_namespaced_replica_set,
            "Job": self._batch.read_namespaced_job,
        }
        if kind in readers:
            try:
                owner = controller_of(as_json(readers[kind](name, namespace, _request_timeout=_TIMEOUT)))
            except ApiException as exc:
                if exc.status != 404:
                    raise
                return top  # gone for now (a JobSet restart recreates its Job): not cached
            if owner is not None:
                top = self._top(namespace, owner)
        self._cache[key] = top
        return top


def pods_on(core: client.CoreV1Api, node: str) -> list[dict[str, Any]]:
    return [as_json(p) for p in preemption.pods_on(core, node)]


def read_node(core: client.CoreV1Api, node: str) -> dict[str, Any] | None:
    try:
        return as_json(core.read_node(node, _request_timeout=_TIMEOUT))  # type: ignore[no-any-return]
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def recorded_plan(node: Mapping[str, Any] | None) -> DrainPlan | None:
    """The drain plan a gate wrote on the Node when it cordoned it, if any (a restart finishes that drain)."""
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(REMEDIATION_GATE_ANNOTATION)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        pods = tuple(
            DrainedPod(
                namespace=p["namespace"],
                name=p["name"],
                uid=p["uid"],
                workload=None if p.get("workload") is None else WorkloadRef.parse(p["workload"]),
                checkpointing=bool(p.get("checkpointing")),
            )
            for p in data["pods"]
        )
        return DrainPlan(str(data["remediation"]), str(data["node"]), pods, tuple(data.get("left") or ()))
    except (ValueError, KeyError, TypeError):
        return None  # not ours, or damaged: planned again from the node's pods


def plan_annotation(plan: DrainPlan) -> str:
    return json.dumps(
        {
            "remediation": plan.remediation_id,
            "node": plan.node,
            "pods": [
                {
                    "namespace": p.namespace,
                    "name": p.name,
                    "uid": p.uid,
                    "workload": None if p.workload is None else str(p.workload),
                    "checkpointing": p.checkpointing,
                }
                for p in plan.pods
            ],
            "left": list(plan.left),
        },
        sort_keys=True,
    )


def read_plan(api: client.ApiClient, remediation_id: str, node: Mapping[str, Any]) -> DrainPlan:
    """The drain of the Node ``node`` (as read) for ``remediation_id``: the one a gate recorded on it for this
    remediation (its pods may be gone already), else a new one from the node's pods now."""
    core = client.CoreV1Api(api)
    recorded = recorded_plan(node)
    if recorded is not None and recorded.remediation_id == remediation_id:
        return recorded
    name = str((node.get("metadata") or {}).get("name"))
    pods = pods_on(core, name)
    owners = Owners(api)
    uids = [str((p.get("metadata") or {}).get("uid")) for p in pods]
    return drain_plan(
        remediation_id,
        name,
        pods,
        {uid: owners.of(p) for uid, p in zip(uids, pods, strict=True)},
        {uid: runs_checkpoint_runtime(p, CHECKPOINT_CONTRACT_ENV) for uid, p in zip(uids, pods, strict=True)},
    )


def cordon(core: client.CoreV1Api, plan: DrainPlan) -> None:
    """Cordon the node and record the plan on it (before any eviction, so a restart knows every pod taken)."""
    preemption.cordon(core, plan.node, {REMEDIATION_GATE_ANNOTATION: plan_annotation(plan)})


def uncordon(core: client.CoreV1Api, node: str) -> bool:
    """Uncordon a node this gate cordoned (its annotation there) and drop the annotation; whether it did."""
    found = read_node(core, node)
    annotations = ((found or {}).get("metadata") or {}).get("annotations") or {}
    if found is None or REMEDIATION_GATE_ANNOTATION not in annotations:
        return False
    if preemption.PREEMPTED_AT_ANNOTATION in annotations:
        # Preempted meanwhile: the platform's cordon now; only the gate's mark goes.
        core.patch_node(node, {"metadata": {"annotations": {REMEDIATION_GATE_ANNOTATION: None}}})
        return False
    preemption.uncordon(core, node, [REMEDIATION_GATE_ANNOTATION])
    return True


def evict(core: client.CoreV1Api, plan: DrainPlan, on_node: list[Any]) -> list[str]:
    """Ask the Eviction API to evict every pod of the plan still on the node (``on_node``: its pods as just
    read; again for those a PodDisruptionBudget refused before): each gets SIGTERM and its own grace period, at
    most the platform's limit. The pods a budget refuses now, to be tried again."""
    taken = {p.uid for p in plan.pods}
    refused = []
    for pod in on_node:
        meta = pod.metadata
        if meta is None or str(meta.uid) not in taken or meta.deletion_timestamp is not None:
            continue
        if pod.status is not None and pod.status.phase in ("Succeeded", "Failed"):
            continue
        if not preemption.terminate(core, pod, TerminationMode.EVICTION, GRACE_PERIOD_LIMIT_SECONDS):
            refused.append(f"{meta.namespace}/{meta.name}")
    return refused


def workload_states(api: client.ApiClient, plan: DrainPlan) -> dict[WorkloadRef, WorkloadState]:
    """Each workload of the plan as it is now: finished, suspended (Kueue requeued it), its pods."""
    core = client.CoreV1Api(api)
    owners = Owners(api)
    states = {}
    pods_by_namespace: dict[str, list[dict[str, Any]]] = {}
    for workload in plan.workloads:
        if workload.namespace not in pods_by_namespace:
            pods_by_namespace[workload.namespace] = [
                as_json(p)
                for p in core.list_namespaced_pod(workload.namespace, _request_timeout=_TIMEOUT).items
            ]
        finished, suspended = _controller_state(api, workload)
        pods = [p for p in pods_by_namespace[workload.namespace] if owners.of(p) == workload]
        states[workload] = WorkloadState(finished=finished, suspended=suspended, pods=pods)
    return states


def _controller_state(api: client.ApiClient, workload: WorkloadRef) -> tuple[bool, bool]:
    """(finished, suspended) as the workload's controller says (Jobs and JobSets; others never are)."""
    try:
        if workload.kind == "Job":
            obj = as_json(
                client.BatchV1Api(api).read_namespaced_job(
                    workload.name, workload.namespace, _request_timeout=_TIMEOUT
                )
            )
        elif workload.kind == JOBSET_API.kind:
            obj = client.CustomObjectsApi(api).get_namespaced_custom_object(
                JOBSET_API.group,
                JOBSET_API.version,
                workload.namespace,
                JOBSET_API.plural,
                workload.name,
                _request_timeout=_TIMEOUT,
            )
        else:
            return False, False
    except ApiException as exc:
        if exc.status == 404:
            return True, False  # deleted: nothing of it runs any more
        raise
    finished = any(condition_true(obj, kind) for kind in ("Complete", "Completed", "Failed"))
    return finished, bool((obj.get("spec") or {}).get("suspend"))


_SAVED_LINE = re.compile(
    r"^(?P<at>\S+) "
    + re.escape(contract.REPORT_PREFIX + " ")
    + re.escape(contract.SAVED_REPORT)
    .replace(r"\{name\}", r"(?P<name>\S+)")
    .replace(r"\{step\}", r"(?P<step>\d+)")
)


def last_checkpoint(log: str) -> tuple[int, datetime.datetime] | None:
    """The step and time of the newest checkpoint a pod's log (read with the kubelet's timestamps) reports."""
    newest = None
    for line in log.splitlines():
        match = _SAVED_LINE.match(line)
        if match is not None:
            at = datetime.datetime.fromisoformat(match["at"].replace("Z", "+00:00"))
            newest = (int(match["step"]), at)
    return newest


def read_last_checkpoint(
    core: client.CoreV1Api, namespace: str, name: str
) -> tuple[int, datetime.datetime] | None:
    """:func:`last_checkpoint` of the pod's log; ``None`` when there is none or no log can be read (a
    simulated pod, a node gone)."""
    try:
        log = core.read_namespaced_pod_log(
            name, namespace, timestamps=True, limit_bytes=4 << 20, _request_timeout=_TIMEOUT
        )
    except ApiException:
        return None
    return last_checkpoint(str(log))
