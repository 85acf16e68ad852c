"""What an autoscaling cluster's pods ask of the platform, read from its Kubernetes pods (pure).

The twin lists a cluster's pods each pass and hands the platform two facts (see
:mod:`together_clusters.emulator.autoscaling` for what the platform does with them):

* the GPUs of pods waiting for lack of GPUs: ``Pending``, not bound to a node, ``PodScheduled=False`` with
  reason ``Unschedulable``, each counted as the scheduler counts it
  (:func:`~together_clusters.platform.pod_gpu_request`). Left out: a pod asking no GPU (no GPU node helps it),
  one asking more than a node's GPUs (no node added could take it), and one that may not run on a standard
  node (a node selector or required node affinity on the compute class that excludes ``standard``), since
  autoscaling adds standard nodes only;
* the nodes running a pod: bound, not finished, and not a DaemonSet's (a DaemonSet runs on every node: it
  keeps none busy).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from together_clusters.platform import (
    COMPUTE_CLASS_LABEL,
    FINISHED_POD_PHASES,
    GPUS_PER_NODE,
    ComputeClass,
    pod_gpu_request,
)


@dataclass(frozen=True)
class Demand:
    """A cluster's demand as autoscaling reads it."""

    pending_gpus: int
    busy_nodes: frozenset[str]
    """Names of the Nodes running a pod."""


def demand_of(pods: Iterable[Mapping[str, Any]]) -> Demand:
    """The demand of a cluster's pods (JSON objects as the API lists them)."""
    pending = 0
    busy: set[str] = set()
    for pod in pods:
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        node = spec.get("nodeName")
        if node:
            if status.get("phase") not in FINISHED_POD_PHASES and not _of_daemon_set(pod):
                busy.add(str(node))
            continue
        if not _unschedulable(status) or not may_run_on_standard(spec):
            continue
        try:
            gpus = pod_gpu_request(spec)
        except ValueError:
            continue
        if 0 < gpus <= GPUS_PER_NODE:
            pending += gpus
    return Demand(pending, frozenset(busy))


def _unschedulable(status: Mapping[str, Any]) -> bool:
    if status.get("phase") != "Pending":
        return False
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or []
    )


def _of_daemon_set(pod: Mapping[str, Any]) -> bool:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" for o in owners)


def may_run_on_standard(spec: Mapping[str, Any]) -> bool:
    """Whether the pod's node selector and required node affinity let it run on a standard node."""
    selected = (spec.get("nodeSelector") or {}).get(COMPUTE_CLASS_LABEL)
    if selected is not None and selected != ComputeClass.STANDARD:
        return False
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    # Terms are ORed, the expressions of a term ANDed.
    return not required or any(_term_allows_standard(t) for t in required)


def _term_allows_standard(term: Mapping[str, Any]) -> bool:
    for expression in term.get("matchExpressions") or []:
        if expression.get("key") != COMPUTE_CLASS_LABEL:
            continue
        values = expression.get("values") or []
        operator = expression.get("operator")
        if operator == "In" and ComputeClass.STANDARD not in values:
            return False
        if operator == "NotIn" and ComputeClass.STANDARD in values:
            return False
        if operator == "DoesNotExist":
            return False
    return True
