"""The platform's vocabulary: the facts about Together GPU clusters that the product relies on, defined once.

The labels, taint and annotations a cluster's Kubernetes objects carry, the node size, the grace-period
limit, the node lifecycle event reasons, the node-name patterns and the ways a preempted node's pods are
terminated. Every product module (provider, components, drift, templates, examples) imports them from here;
the emulator may too. This module imports nothing beyond the standard library, so the in-container checkpoint
runtime can use it; :mod:`together_clusters.platform.preemption`, the preemption sequence on a cluster's
Kubernetes API, needs the ``kubernetes`` client and is imported on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

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

GRACE_PERIOD_LIMIT_SECONDS = 300
"""A preempted node is deleted at the latest this many seconds after it is cordoned (sooner once its pods have
exited): the most a pod gets after SIGTERM."""

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
