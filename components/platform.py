"""Facts about Together GPU clusters that every component relies on.

This module is the only place that knows the compute-class label, its values, the preemptible
taint and the grace-period limit. It imports nothing beyond the standard library so the
in-container checkpoint runtime can use it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

COMPUTE_CLASS_LABEL = "together.ai/compute-class"
"""Node label whose value ``preemptible`` marks preemptible nodes; standard nodes may lack it."""

PREEMPTIBLE = "preemptible"
"""Value of :data:`COMPUTE_CLASS_LABEL` on preemptible nodes."""

CRITICAL_LABEL = "together.ai/critical"
"""Pod label (value ``"true"``) marking a workload that must never run on preemptible nodes."""

CHECKPOINT_ANNOTATION = "together.ai/checkpoint"
"""Pod annotation by which a Job on preemptible nodes says it needs no checkpoint storage from us."""

CHECKPOINT_NONE = "none"
"""No state to lose: a rerun from the start is as good (an eval, a short scoring pass)."""

CHECKPOINT_USER_MANAGED = "user-managed"
"""The workload saves and restores its own state (its own S3 code, a framework's checkpointing)."""

CHECKPOINT_OPT_OUTS = frozenset({CHECKPOINT_NONE, CHECKPOINT_USER_MANAGED})

GRACE_PERIOD_LIMIT_SECONDS = 300
"""A preempted node is deleted this many seconds after it is cordoned: the most a pod gets after SIGTERM."""

PREEMPTION_REASON = "TogetherPreempted"
"""Reason of the node lifecycle event recorded when a preemptible node is reclaimed."""

DISRUPTION_CONDITION = "DisruptionTarget"
"""Pod condition Kubernetes sets on pods being removed by a disruption (eviction, node deletion)."""


class ComputeClass(StrEnum):
    """Where a workload runs."""

    STANDARD = "standard"
    PREEMPTIBLE = "preemptible"


@dataclass(frozen=True)
class Taint:
    """A node taint (or the toleration that matches it exactly)."""

    key: str
    value: str
    effect: str = "NoSchedule"


DEFAULT_PREEMPTIBLE_TAINT = Taint(key=COMPUTE_CLASS_LABEL, value=PREEMPTIBLE, effect="NoSchedule")
"""The taint preemptible nodes are assumed to carry unless a component is told otherwise."""
