"""What a node remediation does to a cluster's Kubernetes Nodes, as the twin plays it.

The platform's state machine (:mod:`together_clusters.emulator.remediations`) knows nothing of Kubernetes: each
state a remediation enters reaches the twin as a :class:`~together_clusters.emulator.remediations.
RemediationTransition`, handed over with the cluster's view (so the Nodes the twin has made match the node
list the transition left), and :func:`play` acts on it with the preemption sequence's functions
(:mod:`together_clusters.sequences.preemption`: cordon, terminate, remove, record an Event):

- ``QUARANTINING`` (``HOST_AWARE``, ``HOST_POWER_CYCLE``: "cordons the host"): the Node is cordoned
  (:data:`~together_clusters.platform.REMEDIATION_ANNOTATION` says by which remediation); its pods keep running.
- ``RUNNING``: the Node is cordoned (if it was not yet) and its pods are terminated as the mode implies:

  * ``VM_ONLY``, ``HOST_AWARE``, ``EVICT_WITHOUT_REPLACEMENT`` delete the VM. The SDK says only "deletes the
    VM" / "evicts the VM"; Together's node-repair guide says a repair runs "cordon, graceful drain,
    remediation action, and node rejoin", not whether the drain honours PodDisruptionBudgets or how long it
    lasts. The twin plays the harshest plausible graceful drain: every pod but a DaemonSet's is *deleted*
    (:data:`DRAIN`, no Eviction API, so no budget holds it and no ``DisruptionTarget`` condition is set)
    with its own grace period, at most the platform's limit (300 s), and at most until the VM goes (the
    repair's ``SUCCEEDED``, when the Node is deleted and what still runs is collected as by the pod garbage
    collector). A workload that needs its budget honoured drains the node itself before approving.
  * ``REBOOT_VM``, ``HOST_POWER_CYCLE``: the VM goes down at once, so no grace period (the harshest case;
    the guide's "graceful drain" may apply to these modes too): every pod on the Node,
    DaemonSet pods included, is deleted with grace 0 — a local process is killed (SIGKILL, exit 137), a
    simulated pod ends with exit code 137 too (:data:`KILLED_EXIT_CODE`), a Job's pod is held by its
    finalizer until the Job controller counts it failed: a kill is a failure against the workload's retries
    (it did not save), unless the node was drained first (the remediation gate). A kubelet coming back after a real reboot would restart ``restartPolicy: Always`` containers in
    place and fail the others; deleting them is the harsher case (every pod is rescheduled, and elsewhere:
    the Node stays cordoned while it is down). The Node itself stays Ready: kwok would mark it Ready again
    at once, and the cordon already keeps new pods off.
- ``SUCCEEDED``: ``VM_ONLY``/``HOST_AWARE``: the old Node is deleted (its pods collected) and the new
  instance's Node joins (the twin's reconcile creates it from the node list, with the class's labels and
  taint); ``EVICT_WITHOUT_REPLACEMENT``: the Node is deleted; ``REBOOT_VM``/``HOST_POWER_CYCLE``: the same
  Node is uncordoned.
- ``FAILED``, ``CANCELLED``: the Node, if still there, is uncordoned when this remediation cordoned it (not
  one cordoned by someone else, nor one being preempted); pods already terminated stay so.

Each step records an Event on the Node (reasons :class:`~together_clusters.platform.RemediationReason`). Every
step can be played again (a pass that failed half-way retries it).
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from together_clusters.platform import (
    GRACE_PERIOD_LIMIT_SECONDS,
    REMEDIATION_ANNOTATION,
    RemediationReason,
    TerminationMode,
)
from together_clusters.sequences import preemption

from .. import remediations
from ..remediations import RemediationTransition
from . import kwok_config
from .nodes import node_name

_TIMEOUT = 10
DRAIN = TerminationMode.DELETE
"""How the modes that delete the VM terminate the node's pods (see the module docstring)."""
KILLED_EXIT_CODE = 137
"""128 + SIGKILL: how a container killed by the reboot or power cycle ends (a local process gets the real
SIGKILL; a simulated pod is annotated to end so), never the 143 of a SIGTERM the workload saved on: a Job's
pod failure policy that ignores preemptions (143, ``DisruptionTarget``) counts such a kill as a failure, as it
would on a real node."""
KILLING_MODES = frozenset({remediations.REBOOT_VM, remediations.HOST_POWER_CYCLE})
"""The modes whose pods are killed at once."""
RELEVANT_STATES = frozenset({"QUARANTINING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"})
"""The states that change a Node; the others (awaiting approval or processing, auto-resolved) do not."""


def play(core: CoreV1Api, transition: RemediationTransition) -> None:
    """Apply one state a remediation entered to the cluster's Nodes."""
    name = node_name(transition.node_id)
    short_mode = transition.mode.removeprefix("REMEDIATION_MODE_")
    what = f"remediation {transition.remediation_id} ({short_mode}) of instance {transition.instance_id}"
    state = transition.state
    if state == "QUARANTINING":
        if _cordon(core, name, transition):
            message = f"Host quarantined for {what}: node cordoned"
            _record(core, name, RemediationReason.CORDONED, message, transition)
    elif state == "RUNNING":
        if not _cordon(core, name, transition):
            return
        if transition.mode in KILLING_MODES:
            count = _kill(core, name)
            how = f"{count} pod(s) killed at once (deleted with grace 0): the VM goes down without a grace"
        else:
            count = _drain(core, name)
            how = (
                f"{count} pod(s) deleted with their grace period (at most {GRACE_PERIOD_LIMIT_SECONDS}s, "
                "until the VM is deleted)"
            )
        _record(core, name, RemediationReason.STARTED, f"Running {what}: node cordoned, {how}", transition)
    elif state == "SUCCEEDED":
        _succeeded(core, name, what, transition)
    elif state in ("FAILED", "CANCELLED"):
        if _restore(core, name, transition):
            reason = RemediationReason.FAILED if state == "FAILED" else RemediationReason.CANCELLED
            _record(core, name, reason, f"{what} {state.lower()}: node uncordoned", transition)


def _succeeded(core: CoreV1Api, name: str, what: str, transition: RemediationTransition) -> None:
    if transition.mode in remediations.REMOVING_MODES:
        # The reconcile has usually deleted it already (the node list no longer has it): then this is a no-op.
        if _read(core, name) is not None:
            preemption.remove_node(core, name)
        if transition.replacement_node_id is not None:
            new = node_name(transition.replacement_node_id)
            instance = transition.replacement_instance_id
            message = f"{what} succeeded: node {name} replaced by {new} (instance {instance})"
            _record(core, new, RemediationReason.SUCCEEDED, message, transition)
        else:
            message = f"{what} succeeded: node {name} evicted without replacement"
            _record(core, name, RemediationReason.SUCCEEDED, message, transition)
        return
    if _restore(core, name, transition):
        _record(
            core, name, RemediationReason.SUCCEEDED, f"{what} succeeded: node back, uncordoned", transition
        )


def _read(core: CoreV1Api, name: str) -> Any:
    try:
        return core.read_node(name, _request_timeout=_TIMEOUT)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _cordon(core: CoreV1Api, name: str, transition: RemediationTransition) -> bool:
    """Cordon the Node for ``transition``'s remediation; ``False`` when there is no such Node. A Node someone
    else cordoned stays cordoned but is not marked as this remediation's (so its end leaves it cordoned)."""
    node = _read(core, name)
    if node is None:
        return False
    if not (node.spec is not None and node.spec.unschedulable):
        preemption.cordon(core, name, {REMEDIATION_ANNOTATION: transition.remediation_id})
    return True


def _restore(core: CoreV1Api, name: str, transition: RemediationTransition) -> bool:
    """Uncordon the Node if this remediation cordoned it (and it is not being preempted); whether it did."""
    node = _read(core, name)
    if node is None or preemption.is_announced(node):
        return False
    annotations = (node.metadata.annotations if node.metadata is not None else None) or {}
    if annotations.get(REMEDIATION_ANNOTATION) != transition.remediation_id:
        return False
    preemption.uncordon(core, name, [REMEDIATION_ANNOTATION])
    return True


def _drain(core: CoreV1Api, name: str) -> int:
    """Delete the Node's pods (DaemonSet pods aside) with their grace period; how many."""
    pods = preemption.pods_to_terminate(core, name, DRAIN)
    for pod in pods:
        preemption.terminate(core, pod, DRAIN, GRACE_PERIOD_LIMIT_SECONDS)
    return len(pods)


def _kill(core: CoreV1Api, name: str) -> int:
    """Delete every pod on the Node with grace 0 (those already terminating too: their grace is cut); how
    many."""
    killed = 0
    for pod in preemption.pods_on(core, name):
        meta = pod.metadata
        phase = pod.status.phase if pod.status is not None else None
        if meta is None or phase in ("Succeeded", "Failed") or meta.deletion_grace_period_seconds == 0:
            continue
        if not kwok_config.runs_locally(meta.annotations, meta.labels):
            # A simulated pod would end as if it had got SIGTERM (143); a kill ends it as SIGKILL does.
            _mark_killed(core, str(meta.name), str(meta.namespace))
        preemption.terminate(core, pod, TerminationMode.DELETE, 0)
        killed += 1
    return killed


def _mark_killed(core: CoreV1Api, name: str, namespace: str) -> None:
    try:
        core.patch_namespaced_pod(
            name,
            namespace,
            {"metadata": {"annotations": {kwok_config.TERMINATION_EXIT_CODE: str(KILLED_EXIT_CODE)}}},
            _request_timeout=_TIMEOUT,
        )
    except ApiException as exc:
        if exc.status != 404:
            raise


def _record(
    core: CoreV1Api, name: str, reason: RemediationReason, message: str, transition: RemediationTransition
) -> None:
    node = _read(core, name)
    uid = node.metadata.uid if node is not None and node.metadata is not None else None
    event_type = "Normal" if reason is RemediationReason.SUCCEEDED else "Warning"
    preemption.record_event(core, name, reason, message, transition.at, uid, event_type)
