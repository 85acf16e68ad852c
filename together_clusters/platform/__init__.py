"""The platform's vocabulary: the facts about Together GPU clusters that the product relies on, defined once.

The labels, taint and annotations a cluster's Kubernetes objects carry, the node size, the GPU resource and
how a pod's GPUs are counted, the grace-period limit, the node lifecycle event reasons, the node-name
patterns, the ways a preempted node's pods are terminated and JobSet's identity in the Kubernetes API. Every
product module (provider, components, the command line, templates, examples) imports them from here; the
emulator may too. This package imports nothing beyond the standard library and the checkpoint
runtime's contract (the grace limit's home, since training images install the runtime alone); the preemption
sequence played on a cluster's Kubernetes API lives in :mod:`together_clusters.sequences.preemption`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

# --- compute classes, labels, taints --------------------------------------------------------------

COMPUTE_CLASS_LABEL = "together.ai/compute-class"
"""Node label whose value ``preemptible`` marks preemptible nodes; standard nodes may lack it."""


class ComputeClass(StrEnum):
    """Where a workload runs. ``STANDARD`` and ``PREEMPTIBLE`` are also the values of :data:`COMPUTE_CLASS_LABEL`.

    ``PREEMPTIBLE_FIRST`` is a workload's choice, not a node's: its pods run on preemptible nodes when there is
    room and on idle standard capacity when there is not, at :data:`FALLBACK_PRIORITY_CLASS`, so a critical pod
    takes the standard node back (the fallback pod is preempted by the scheduler: saved and resumed, not counted).
    """

    STANDARD = "standard"
    PREEMPTIBLE = "preemptible"
    PREEMPTIBLE_FIRST = "preemptible-first"


PREEMPTIBLE = ComputeClass.PREEMPTIBLE.value
"""Value of :data:`COMPUTE_CLASS_LABEL` on preemptible nodes."""

CRITICAL_LABEL = "together.ai/critical"
"""Pod label (value ``"true"``) marking a workload that must never run on preemptible nodes."""

PLACEMENT_LABEL = "together.ai/placement"
"""Pod label: the :class:`ComputeClass` its workload asked for (so ``preemptible-first`` pods can be found on
standard nodes and moved back, and reported as fallback)."""

CONTROLLER_LABEL = "together.ai/controller"
"""Pod label on the pods of the package's own controllers (its value a :class:`PackageController`): a pod
that runs this package's code against the cluster, not a user's workload. Whoever looks after a cluster finds
them by it (the emulator's Kubernetes twin runs them as local processes, as it does the controllers installed
from official charts)."""


class PackageController(StrEnum):
    """The package's own controllers, the values of :data:`CONTROLLER_LABEL`."""

    FLEET_DISPATCHER = "fleet-dispatcher"
    """The fleet's dispatcher (``FleetQueue``), on the manager."""
    REMEDIATION_GATE = "remediation-gate"
    """The remediation gate (``RemediationGate``)."""


# --- priorities: who keeps the standard nodes when capacity is short --------------------------------
# Only fallback pods get a class of their own, below the default: every other pod (critical ones, STANDARD
# workloads, the user's own) keeps the default priority 0 and so takes a standard node back from them,
# and no pod of the package ever preempts a pod the user runs beside it.

FALLBACK_PRIORITY_CLASS = "together-fallback"
"""PriorityClass of ``PREEMPTIBLE_FIRST`` pods (installed by ``ClusterControllers``): below the default, and
never preempting (``preemptionPolicy: Never``), so a fallback pod only takes room nobody else wants and
yields it to anything that asks."""

FALLBACK_PRIORITY = -100
"""Its value."""


@dataclass(frozen=True)
class Taint:
    """A node taint (or the toleration that matches it exactly)."""

    key: str
    value: str
    effect: str = "NoSchedule"


DEFAULT_PREEMPTIBLE_TAINT = Taint(key=COMPUTE_CLASS_LABEL, value=PREEMPTIBLE, effect="NoSchedule")
"""The taint preemptible nodes are assumed to carry unless a component is told otherwise."""

# --- checkpoints -----------------------------------------------------------------------------------

CHECKPOINT_ANNOTATION = "together.ai/checkpoint"
"""Pod annotation by which a Job on preemptible nodes says it needs no checkpoint storage from us."""

CHECKPOINT_NONE = "none"
"""No state to lose: a rerun from the start is as good (an eval, a short scoring pass)."""

CHECKPOINT_USER_MANAGED = "user-managed"
"""The workload saves and restores its own state (its own S3 code, a framework's checkpointing)."""

CHECKPOINT_OPT_OUTS = frozenset({CHECKPOINT_NONE, CHECKPOINT_USER_MANAGED})

# --- nodes -----------------------------------------------------------------------------------------

GPUS_PER_NODE = 8
"""GPUs of one worker node: GPU counts come in whole nodes."""

FINISHED_POD_PHASES = frozenset({"Succeeded", "Failed"})
"""The phases of a pod whose containers are done: it holds nothing on its node any more."""

GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource a node's GPUs are (NVIDIA's device plugin): a worker node has :data:`GPUS_PER_NODE`
of it allocatable, a pod asks for them in its containers' ``resources`` (see :func:`pod_gpu_request`)."""


def pod_gpu_request(pod_spec: Mapping[str, Any]) -> int:
    """The GPUs a pod takes from its node, counted as kube-scheduler counts them against the node's allocatable
    :data:`GPU_RESOURCE`: so a count here fits a node exactly when the scheduler would place the pod there.
    Every place the package counts a pod's GPUs (the capacity warning of ``up``, the GPU-hours of ``status``)
    uses this one function, and tests/twin holds it to the real scheduler.

    The scheduler's rule (``PodRequests`` of k8s.io/component-helpers/resource), over a pod spec as plain data
    (the API's camelCase names; quantities as strings or numbers; absent and null fields alike):

    * a container counts its requests, else its limits. The API server defaults unset requests to the
      limits, and for an extended resource the two must be equal (requests without limits are refused), so
      a spec not defaulted yet (a rendered manifest) counts as the pod it becomes;
    * the app containers add up, and so do the restartable init containers (sidecars, ``restartPolicy:
      Always``), which keep running beside them;
    * every other init container runs alone before the app containers, beside the sidecars declared before
      it: the pod needs the largest of those moments when it is above that sum;
    * the pod's ``overhead`` (its RuntimeClass's) adds on. Pod-level ``resources`` cover CPU, memory and
      hugepages only, not GPUs.

    A count that is not a whole number raises ``ValueError`` (the API server refuses it too).
    """
    running = sum(_gpus_of_container(c) for c in pod_spec.get("containers") or [])
    sidecars = 0  # the restartable init containers declared so far
    init_peak = 0
    for container in pod_spec.get("initContainers") or []:
        gpus = _gpus_of_container(container)
        if container.get("restartPolicy") == "Always":
            sidecars += gpus
            running += gpus
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + gpus)
    return max(running, init_peak) + _gpu_count((pod_spec.get("overhead") or {}).get(GPU_RESOURCE))


def _gpus_of_container(container: Mapping[str, Any]) -> int:
    """A container's GPUs: its requests, else its limits (what the API server defaults the requests to)."""
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    return _gpu_count(requests[GPU_RESOURCE] if GPU_RESOURCE in requests else limits.get(GPU_RESOURCE))


def _gpu_count(quantity: object) -> int:
    """A quantity of GPUs (``2``, ``"2"``, ``"2000m"``) as a whole number; ``None`` is none."""
    if quantity is None:
        return 0
    text = str(quantity).strip()
    try:
        count = Decimal(text[:-1]) / 1000 if text.endswith("m") else Decimal(text)
    except InvalidOperation:
        count = Decimal("NaN")
    if not count.is_finite() or count < 0 or count != count.to_integral_value():
        raise ValueError(f"{GPU_RESOURCE} must be a whole number of GPUs, not {quantity!r}")
    return int(count)


# The grace limit's one home is the checkpoint runtime's contract (training images install it alone).
from together_clusters.components.checkpoint.contract import (  # noqa: E402
    GRACE_PERIOD_LIMIT_SECONDS as GRACE_PERIOD_LIMIT_SECONDS,
)

DISRUPTION_CONDITION = "DisruptionTarget"
"""Pod condition Kubernetes sets on pods being removed by a disruption (eviction, node deletion)."""

STANDARD_NODE_PREFIX = "gpu-dp"
"""How the name of a standard node begins (the platform's documentation: the name encodes the class)."""

PREEMPTIBLE_NODE_PREFIX = "gpu-preemptible-dp"
"""How the name of a preemptible node begins."""

NODE_NAME_PREFIXES = {
    ComputeClass.STANDARD: STANDARD_NODE_PREFIX,
    ComputeClass.PREEMPTIBLE: PREEMPTIBLE_NODE_PREFIX,
}
"""How a node's name begins, by its class."""

_NODE_NAME_PATTERNS = (
    (re.compile(rf"^{re.escape(PREEMPTIBLE_NODE_PREFIX)}"), ComputeClass.PREEMPTIBLE),
    (re.compile(rf"^{re.escape(STANDARD_NODE_PREFIX)}"), ComputeClass.STANDARD),
)


def compute_class_of_node(node_name: str) -> ComputeClass | None:
    """The compute class a node's name encodes; ``None`` for a name of neither pattern."""
    for pattern, compute_class in _NODE_NAME_PATTERNS:
        if pattern.match(node_name):
            return compute_class
    return None


# --- node lifecycle events -------------------------------------------------------------------------


class LifecycleReason(StrEnum):
    """The reasons of node lifecycle events (a cluster's ``node_lifecycle_events``, the Kubernetes Events
    on its Nodes). The official SDK (``together`` 3.1.1, ``NodeLifecycleEvent.reason``) and the platform's
    documentation do not name the same set: both are recognised everywhere events are read."""

    PREEMPTED = "TogetherPreempted"
    """A preemptible node is being reclaimed: the SDK's name (and the announcement's)."""
    PREEMPTION_NOTIFIED = "TogetherPreemptionNotified"
    """A preemptible node is being reclaimed: the documentation's name for the Kubernetes Event."""
    NODE_ADDED = "TogetherNodeAdded"
    """A node joined the cluster (the documentation's name)."""
    SCALED_UP = "TogetherScaledUp"
    """The cluster gained a node (the SDK's name)."""
    SCALED_DOWN = "TogetherScaledDown"
    """The cluster lost a node to a scale-down (both name it)."""


LIFECYCLE_EVENT_RETENTION_SECONDS = 72 * 3600
"""How long a cluster's ``node_lifecycle_events`` keep an event (the documentation: 72 hours); they keep one
event per node and reason."""

PREEMPTION_REASONS = frozenset({LifecycleReason.PREEMPTED, LifecycleReason.PREEMPTION_NOTIFIED})
"""Both names a preemption goes by: whoever reads lifecycle events recognises either."""


def is_preemption(reason: str | None) -> bool:
    """Whether a lifecycle event's reason announces a preemption (under either of its names)."""
    return reason in PREEMPTION_REASONS


# --- preemption ------------------------------------------------------------------------------------


class TerminationMode(StrEnum):
    """How a preempted node's pods are terminated; the platform does not document which, so all are tested."""

    EVICTION = "eviction"
    """Through the Eviction API, as node termination handlers do (PodDisruptionBudgets apply; the API server
    sets the pod condition ``DisruptionTarget``). The default."""
    DELETE = "delete"
    """A plain pod delete with the pod's grace period (no disruption condition)."""
    SIGNAL = "signal"
    """SIGTERM to the containers, no API call: they exit 143, the pod fails without a disruption condition."""


# --- node remediations -----------------------------------------------------------------------------


def kubernetes_node_name(host_name: str) -> str:
    """The name of the Kubernetes Node behind a cluster's worker node (``gpu_worker_nodes[].host_name``, which
    a remediation calls ``instance_name``): the host name as a DNS-1123 name (lower case; other characters
    become ``-``). Every place that goes from the compute API's nodes to Kubernetes Nodes (the remediation
    gate, ``status``, the twin that makes the Nodes) uses this one function."""
    name = re.sub(r"[^a-z0-9.-]+", "-", host_name.lower()).strip("-.")
    return name[:253] or "node"


REMEDIATION_ANNOTATION = "together.ai/remediation"
"""Set on a Node the platform cordoned for a remediation (a repair: replaced, evicted, rebooted or its host
power-cycled): the remediation's id. It says who cordoned the node, so the cordon is lifted when that
remediation ends leaving the node in place (a reboot or power cycle that succeeded, a repair that failed or
was cancelled), never a cordon someone else set; and a twin restarted mid-repair does not play it twice."""


REMEDIATION_MODES: tuple[str, ...] = (
    "REMEDIATION_MODE_VM_ONLY",
    "REMEDIATION_MODE_HOST_AWARE",
    "REMEDIATION_MODE_EVICT_WITHOUT_REPLACEMENT",
    "REMEDIATION_MODE_REBOOT_VM",
    "REMEDIATION_MODE_HOST_POWER_CYCLE",
)
"""The compute API's remediation modes (the SDK's ``RemediationMode``; ``provider.vocabulary`` types them, a
test holds the two equal)."""
REMEDIATION_MODE_PREFIX = "REMEDIATION_MODE_"


def remediation_mode_name(mode: str | None) -> str:
    """A mode as the command line and the components spell it: ``REMEDIATION_MODE_VM_ONLY`` is ``vm-only``."""
    return (mode or "unknown").removeprefix(REMEDIATION_MODE_PREFIX).lower().replace("_", "-")


REMEDIATION_MODES_BY_NAME: dict[str, str] = {remediation_mode_name(mode): mode for mode in REMEDIATION_MODES}
"""``vm-only`` -> ``REMEDIATION_MODE_VM_ONLY``, for every mode: what ``drill --remediation``,
``remediations gate --modes`` and ``RemediationGateArgs.modes`` accept."""
NODE_KEEPING_REMEDIATION_MODES = frozenset(
    {"REMEDIATION_MODE_REBOOT_VM", "REMEDIATION_MODE_HOST_POWER_CYCLE"}
)
"""The modes after which the same node comes back (a reboot, a power cycle)."""

REMEDIATION_GATE_ANNOTATION = "together.ai/remediation-gate"
"""Set on a Node the remediation gate (``together-clusters remediations approve``, the ``RemediationGate``
component) cordoned and drains before it approves a remediation: JSON with the remediation's id and the drain's
plan (the pods it took, their workloads). A gate that restarts reads it and finishes the job; the gate
uncordons the node when the remediation ends leaving the node in place, or is rejected or cancelled."""


class RemediationReason(StrEnum):
    """The reasons of the Kubernetes Events recorded on a Node for a remediation. Neither the official SDK
    (``together`` 3.1.1) nor the platform's documentation names any: these are the emulator's, in the style
    of the lifecycle reasons (:class:`LifecycleReason`), and whoever reads them matches the prefix
    :data:`REMEDIATION_REASON_PREFIX`."""

    CORDONED = "TogetherRemediationCordoned"
    """The node is cordoned for a repair: its host quarantined (``QUARANTINING``, the modes that cordon the
    host first) or the repair starting."""
    STARTED = "TogetherRemediationStarted"
    """The repair runs (``RUNNING``): the node's pods are terminated as its mode implies (the message says
    how)."""
    SUCCEEDED = "TogetherRemediationSucceeded"
    """The repair succeeded: recorded on the node there afterwards (the replacement, or the same node back),
    or under the evicted node's name."""
    FAILED = "TogetherRemediationFailed"
    """The repair failed: the node stays, uncordoned."""
    CANCELLED = "TogetherRemediationCancelled"
    """The repair was cancelled (by a user, or because the node left the cluster): the node, if there, is
    uncordoned."""


REMEDIATION_REASON_PREFIX = "TogetherRemediation"
"""What every :class:`RemediationReason` begins with."""


# --- JobSet ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CustomKind:
    """A kind the Kubernetes API serves through a CustomResourceDefinition, as its clients name it."""

    group: str
    """The API group (an object's ``apiVersion`` before the slash)."""
    version: str
    """The version the package writes and reads."""
    kind: str
    """An object's ``kind``."""
    plural: str
    """The resource's name in API paths and RBAC rules (lower case, plural)."""

    @property
    def api_version(self) -> str:
        """An object's ``apiVersion``: ``<group>/<version>``."""
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        """The name of its CustomResourceDefinition: ``<plural>.<group>``."""
        return f"{self.plural}.{self.group}"


JOBSET_API = CustomKind(group="jobset.x-k8s.io", version="v1alpha2", kind="JobSet", plural="jobsets")
"""JobSet (sigs.k8s.io/jobset; the version ``ClusterControllers`` installs serves ``v1alpha2``): the kind
``BatchJob`` and ``TrainingRun`` render, that the guard, Kueue's integration, the drill and the emulator's
twin know. Its one spelling in the package: tests/platform/test_jobset_identity.py finds any other."""

JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
"""The label the JobSet controller puts on a JobSet's Jobs and pods: the JobSet's uid. A copy MultiKueue makes of a
JobSet on a worker is a new object with a uid of its own, while a pod restarted in place keeps it: the
identity a fleet workload's checkpoint lease is held under."""

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""The label the JobSet controller puts on a JobSet's Jobs and pods: the JobSet's name."""

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""The label the Job controller puts on a Job's pods: the Job's name."""

JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
"""The label the Job controller puts on a Job's pods: the Job's uid (the lease identity of a workload run as a
plain Job)."""
