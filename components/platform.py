"""The platform's facts as the components have always exported them: a re-export of
:mod:`together_clusters.platform`, their one home (``together_clusters.components.platform`` and
``together_clusters.components.ComputeClass`` stay importable). Imports nothing beyond the standard library."""

from __future__ import annotations

from together_clusters.platform import (
    CHECKPOINT_ANNOTATION,
    CHECKPOINT_NONE,
    CHECKPOINT_OPT_OUTS,
    CHECKPOINT_USER_MANAGED,
    COMPUTE_CLASS_LABEL,
    CRITICAL_LABEL,
    DEFAULT_PREEMPTIBLE_TAINT,
    DISRUPTION_CONDITION,
    GPUS_PER_NODE,
    GRACE_PERIOD_LIMIT_SECONDS,
    PREEMPTIBLE,
    ComputeClass,
    LifecycleReason,
    Taint,
    TerminationMode,
    is_preemption,
)

PREEMPTION_REASON = LifecycleReason.PREEMPTED
"""Kept for code that imported it from here: prefer :class:`LifecycleReason` and :func:`is_preemption`."""

__all__ = [
    "CHECKPOINT_ANNOTATION",
    "CHECKPOINT_NONE",
    "CHECKPOINT_OPT_OUTS",
    "CHECKPOINT_USER_MANAGED",
    "COMPUTE_CLASS_LABEL",
    "CRITICAL_LABEL",
    "DEFAULT_PREEMPTIBLE_TAINT",
    "DISRUPTION_CONDITION",
    "GPUS_PER_NODE",
    "GRACE_PERIOD_LIMIT_SECONDS",
    "PREEMPTIBLE",
    "PREEMPTION_REASON",
    "ComputeClass",
    "LifecycleReason",
    "Taint",
    "TerminationMode",
    "is_preemption",
]
