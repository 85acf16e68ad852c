"""What a Kubernetes object says, read as plain data (pure, standard library only): whether one of its status
conditions holds, and the GPUs each node has left.

General Kubernetes facts, so they live with the platform's vocabulary rather than with any one reader: the
fleet's dispatcher (which ships :mod:`together_clusters.platform` in its ConfigMap and runs on a bare
interpreter) decides with them, and the command line (``status``, ``drill``, ``remediations``) reports with
the same ones, so the two never disagree on whether a node is Ready or how much room it has. Objects are the
API's JSON as dicts (``status.conditions``, ``spec.nodeName``); reading them is the caller's business.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from together_clusters.platform import FINISHED_POD_PHASES, GPU_RESOURCE, pod_gpu_request


def condition(found: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The status condition of type ``kind`` of an object (a Node, a Pod, a Job, a Kueue Workload, ...),
    whatever its status, or ``None`` when it has none."""
    conditions = (found.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), None)


def condition_true(found: Mapping[str, Any], kind: str) -> bool:
    """Whether an object's status condition ``kind`` is ``True`` (absent, ``False`` and ``Unknown`` are not)."""
    found_condition = condition(found, kind)
    return found_condition is not None and found_condition.get("status") == "True"


def condition_with(
    found: Mapping[str, Any], kind: str, status: str, reason: str | None = None
) -> Mapping[str, Any] | None:
    """The status condition ``kind`` of an object when it has ``status`` (``"True"``, ``"False"``) and, if named,
    ``reason`` (a pod's ``PodScheduled`` False for ``Unschedulable``), else ``None``."""
    found_condition = condition(found, kind)
    if found_condition is None or found_condition.get("status") != status:
        return None
    return found_condition if reason is None or found_condition.get("reason") == reason else None


def cordoned(node: Mapping[str, Any]) -> bool:
    """Whether a node is cordoned (``spec.unschedulable``: a preemption notice, a repair's drain)."""
    return bool((node.get("spec") or {}).get("unschedulable"))


def takes_new_pods(node: Mapping[str, Any]) -> bool:
    """Whether the scheduler places new pods on a node: ``Ready`` and not :func:`cordoned`."""
    return condition_true(node, "Ready") and not cordoned(node)


def free_gpus_by_node(
    nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> dict[str, int]:
    """The GPUs each schedulable node of ``nodes`` has left, by name: allocatable less the requests of the pods
    bound to it that have not finished (below 0 when they ask more than it has). A cordoned node (a preemption
    notice, a repair) is left out. The fleet's dispatcher places workloads with it and ``together-clusters
    status`` reports a worker's free GPUs with it."""
    free: dict[str, int] = {}
    for node in nodes:
        if cordoned(node):
            continue
        allocatable = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE) or 0
        free[str((node.get("metadata") or {}).get("name"))] = int(str(allocatable))
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name in free and (pod.get("status") or {}).get("phase") not in FINISHED_POD_PHASES:
            free[node_name] -= pod_gpu_request(pod.get("spec") or {})
    return free
