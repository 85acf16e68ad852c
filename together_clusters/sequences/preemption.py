"""The preemption sequence on a cluster's Kubernetes API, as the platform plays it.

At T+0 the Node is cordoned and a lifecycle Event (reason :class:`~together_clusters.platform.LifecycleReason`)
is recorded on it, then its pods are terminated by one of :class:`~together_clusters.platform.TerminationMode`;
once its pods have exited, at the latest at T+grace (the platform's timer), the Node is deleted and the pods
still bound to it are collected. The same
collection applies to a node removed by a scale-down.

Both players use it: the emulator's Kubernetes twin, and ``together-clusters drill`` (on the twin's nodes and
as a game day on a real cluster). It takes plain values (a node name, a time, a message, a mode); what a
cluster's runtime does its own way (how SIGTERM reaches a pod without deleting it) is passed in as a
:class:`PodSignal`.
"""

from __future__ import annotations

import datetime
import secrets
from typing import Any, Protocol, cast

from kubernetes.client import CoreV1Api, V1Pod
from kubernetes.client.exceptions import ApiException

from together_clusters.platform import (
    DISRUPTION_CONDITION,
    GRACE_PERIOD_LIMIT_SECONDS,
    LifecycleReason,
    TerminationMode,
)

_TIMEOUT = 10
EVENT_SOURCE = "together-platform"
"""The component named as the source of the lifecycle Event."""
PREEMPTED_AT_ANNOTATION = "together.ai/preempted-at"
"""Set on a Node when it is cordoned for preemption (RFC 3339), so the sequence is played once."""


class PodSignal(Protocol):
    """How SIGTERM reaches a pod's containers without an API call that deletes the pod
    (:attr:`TerminationMode.SIGNAL`): Kubernetes has none, so the cluster's node runtime provides it."""

    def sent(self, pod: V1Pod) -> bool:
        """Whether the pod has been signalled already."""
        ...

    def send(self, core: CoreV1Api, pod: V1Pod) -> None:
        """Signal the pod's containers."""
        ...


def rfc3339(epoch_seconds: float) -> str:
    """A moment as Kubernetes writes it (UTC, microseconds, ``Z``)."""
    return datetime.datetime.fromtimestamp(epoch_seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def is_announced(node: Any) -> bool:
    """Whether the sequence already began on this Node object (a restart must not play it twice)."""
    annotations = (node.metadata.annotations if node.metadata is not None else None) or {}
    return PREEMPTED_AT_ANNOTATION in annotations


def announce(
    core: CoreV1Api,
    node_name: str,
    at: float,
    message: str,
    reason: LifecycleReason = LifecycleReason.PREEMPTION_NOTIFIED,
) -> None:
    """T+0: cordon the Node (marked with :data:`PREEMPTED_AT_ANNOTATION`), then record the lifecycle Event
    on it (``reason``: the documentation's name for it unless told); ``at`` is epoch seconds."""
    patched = cordon(core, node_name, {PREEMPTED_AT_ANNOTATION: rfc3339(at)})
    record_event(core, node_name, reason, message, at, patched.metadata.uid if patched.metadata else None)


def cordon(core: CoreV1Api, node_name: str, annotations: dict[str, str]) -> Any:
    """Mark the Node unschedulable, with ``annotations`` saying why; the Node as patched."""
    return core.patch_node(
        node_name,
        {"spec": {"unschedulable": True}, "metadata": {"annotations": annotations}},
        _request_timeout=_TIMEOUT,
    )


def uncordon(core: CoreV1Api, node_name: str, annotations: list[str]) -> None:
    """Make the Node schedulable again and drop ``annotations`` (the marks its cordon left)."""
    core.patch_node(
        node_name,
        {"spec": {"unschedulable": None}, "metadata": {"annotations": dict.fromkeys(annotations)}},
        _request_timeout=_TIMEOUT,
    )


def record_event(
    core: CoreV1Api,
    node_name: str,
    reason: str,
    message: str,
    at: float,
    uid: str | None = None,
    event_type: str = "Warning",
) -> None:
    """Record an Event on the Node ``node_name`` (``uid``: its object's, when known; a Node already deleted
    keeps its Events by name), from :data:`EVENT_SOURCE`; ``at`` is epoch seconds."""
    stamp = rfc3339(at)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{node_name}.{secrets.token_hex(8)}", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": uid},
        "reason": str(reason),
        "message": message,
        "type": event_type,
        "source": {"component": EVENT_SOURCE},
        "reportingComponent": EVENT_SOURCE,
        "reportingInstance": node_name,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    core.create_namespaced_event("default", cast(Any, event), _request_timeout=_TIMEOUT)


def name_of(obj: Any) -> tuple[str, str]:
    """An object's name and namespace (``""`` for cluster-scoped objects)."""
    meta = obj.metadata
    assert meta is not None and meta.name is not None
    return str(meta.name), str(meta.namespace or "")


def _owned_by_daemonset(pod: V1Pod) -> bool:
    refs = pod.metadata.owner_references if pod.metadata is not None else None
    return any(ref.kind == "DaemonSet" for ref in refs or [])


def _terminal(pod: V1Pod) -> bool:
    return pod.status is not None and pod.status.phase in ("Succeeded", "Failed")


def _signal_for(mode: TerminationMode, signal: PodSignal | None) -> PodSignal:
    if signal is None:
        raise ValueError(f"termination mode {mode.value} needs the cluster's PodSignal (none was given)")
    return signal


def pods_on(core: CoreV1Api, node_name: str) -> list[V1Pod]:
    """Every pod bound to the node."""
    return list(
        core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node_name}", _request_timeout=_TIMEOUT
        ).items
    )


def pods_to_terminate(
    core: CoreV1Api, node_name: str, mode: TerminationMode, signal: PodSignal | None = None
) -> list[V1Pod]:
    """The node's pods that still need terminating; DaemonSet pods stay (as a drain leaves them) unless the
    whole node gets the signal (``signal`` is needed then)."""
    pods = []
    for pod in pods_on(core, node_name):
        meta = pod.metadata
        if meta is None or _terminal(pod) or meta.deletion_timestamp is not None:
            continue
        if mode is TerminationMode.SIGNAL:
            if _signal_for(mode, signal).sent(pod):
                continue
        elif _owned_by_daemonset(pod):
            continue
        pods.append(pod)
    return pods


def pods_exited(core: CoreV1Api, node_name: str) -> bool:
    """Whether every pod on the node has exited (Succeeded, Failed or gone), DaemonSet pods aside (a drain
    leaves them): the platform reclaims a preempted node then, without waiting for the rest of its grace."""
    return all(_terminal(pod) or _owned_by_daemonset(pod) for pod in pods_on(core, node_name))


NAMESPACE_TERMINATING = "NamespaceTerminating"
"""The cause the API server gives for refusing to create anything (an eviction too) in a namespace being
deleted."""


def terminate(
    core: CoreV1Api, pod: V1Pod, mode: TerminationMode, grace_seconds: float, signal: PodSignal | None = None
) -> bool:
    """Terminate one pod; ``False`` when it must be tried again (an eviction refused by a budget). Its grace
    is the least of ``grace_seconds``, the platform's limit and the pod's own."""
    name, namespace = name_of(pod)
    own = pod.spec.termination_grace_period_seconds if pod.spec is not None else None
    grace = int(min(grace_seconds, GRACE_PERIOD_LIMIT_SECONDS, own if own is not None else 30))
    try:
        if mode is TerminationMode.EVICTION:
            body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": {"gracePeriodSeconds": grace},
            }
            core.create_namespaced_pod_eviction(name, namespace, cast(Any, body), _request_timeout=_TIMEOUT)
        elif mode is TerminationMode.DELETE:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=grace, _request_timeout=_TIMEOUT)
        else:
            _signal_for(mode, signal).send(core, pod)
    except ApiException as exc:
        if exc.status == 404:
            return True
        if exc.status == 429:  # a PodDisruptionBudget refuses for now: a termination handler retries
            return False
        if exc.status == 403 and NAMESPACE_TERMINATING in str(exc.body or ""):
            # Its namespace is being deleted, so the API server refuses the eviction; the namespace controller
            # deletes the pod soon. Retried, as kubectl drain does.
            return False
        raise
    return True


def remove_node(core: CoreV1Api, node_name: str) -> None:
    """Delete the Node, then collect its pods as the pod garbage collector would (sooner than its 40 s
    quarantine): a pod still running is marked Failed with ``DisruptionTarget`` reason ``DeletionByPodGC``,
    then every pod on the node is deleted at once (finalizers, such as a Job's, still hold it), terminating
    ones included: with the node gone no kubelet confirms their deletion, and a JobSet restart waits for
    it."""
    try:
        core.delete_node(node_name, _request_timeout=_TIMEOUT)
    except ApiException as exc:
        if exc.status != 404:
            raise
    now = rfc3339(datetime.datetime.now(datetime.UTC).timestamp())
    for pod in pods_on(core, node_name):
        name, namespace = name_of(pod)
        try:
            if not _terminal(pod):
                status = {
                    "status": {
                        "phase": "Failed",
                        "conditions": [
                            {
                                "type": DISRUPTION_CONDITION,
                                "status": "True",
                                "reason": "DeletionByPodGC",
                                "message": "PodGC: node no longer exists",
                                "lastTransitionTime": now,
                            }
                        ],
                    }
                }
                core.patch_namespaced_pod_status(name, namespace, status, _request_timeout=_TIMEOUT)
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _request_timeout=_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                raise
