"""Where pods go: node affinity, tolerations and topology spread for each compute class (pure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from together_clusters.platform import (
    COMPUTE_CLASS_LABEL,
    DEFAULT_PREEMPTIBLE_TAINT,
    FALLBACK_PRIORITY_CLASS,
    PLACEMENT_LABEL,
    PREEMPTIBLE,
    ComputeClass,
    Taint,
)

HOSTNAME_TOPOLOGY_KEY = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Placement:
    """The scheduling fields of a pod spec for one compute class, and the label saying which class it was."""

    affinity: Mapping[str, Any]
    tolerations: tuple[Mapping[str, Any], ...] = ()
    topology_spread_constraints: tuple[Mapping[str, Any], ...] = field(default=())
    priority_class_name: str | None = None
    compute_class: ComputeClass | None = None
    """The class asked for: the pods' :data:`PLACEMENT_LABEL` (``None`` for a placement made by hand)."""

    def pod_spec_fields(self) -> dict[str, Any]:
        """The fields to merge into a pod spec; empty lists are left out."""
        fields: dict[str, Any] = {"affinity": _copy(self.affinity)}
        if self.tolerations:
            fields["tolerations"] = [dict(t) for t in self.tolerations]
        if self.topology_spread_constraints:
            fields["topologySpreadConstraints"] = [_copy(c) for c in self.topology_spread_constraints]
        if self.priority_class_name:
            fields["priorityClassName"] = self.priority_class_name
        return fields

    def pod_labels(self) -> dict[str, str]:
        """The labels the placement puts on its pods: the class asked for."""
        return {PLACEMENT_LABEL: self.compute_class.value} if self.compute_class is not None else {}


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value


def _preemptible_expression(operator: str) -> dict[str, Any]:
    return {"key": COMPUTE_CLASS_LABEL, "operator": operator, "values": [PREEMPTIBLE]}


def _required_affinity(operator: str) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [_preemptible_expression(operator)]}]
            }
        }
    }


PREFERRED_WEIGHT = 100
"""Weight of the preference for preemptible nodes: the most a preference may weigh, so the scheduler's
other scores (spread, balance) never outweigh half price."""


def _preferred_affinity() -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": PREFERRED_WEIGHT,
                    "preference": {"matchExpressions": [_preemptible_expression("In")]},
                }
            ]
        }
    }


def toleration_for(taint: Taint) -> dict[str, Any]:
    """The toleration that matches exactly ``taint``."""
    return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}


def topology_spread(
    spread_labels: Mapping[str, str], topology_key: str = HOSTNAME_TOPOLOGY_KEY, max_skew: int = 1
) -> dict[str, Any]:
    """Spread pods matching ``spread_labels`` across nodes the pod may actually use.

    Honouring taints and affinity keeps nodes of the other compute class out of the skew count;
    ScheduleAnyway because preempted nodes vanish and a strict spread would strand replacements.
    """
    return {
        "maxSkew": max_skew,
        "topologyKey": topology_key,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": dict(spread_labels)},
        "nodeAffinityPolicy": "Honor",
        "nodeTaintsPolicy": "Honor",
    }


def preemptible_placement(
    spread_labels: Mapping[str, str] | None = None,
    taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT,
    topology_key: str = HOSTNAME_TOPOLOGY_KEY,
) -> Placement:
    """Only preemptible nodes; tolerate their taint (None when they are not tainted)."""
    return Placement(
        affinity=_required_affinity("In"),
        tolerations=(toleration_for(taint),) if taint is not None else (),
        topology_spread_constraints=(topology_spread(spread_labels, topology_key),) if spread_labels else (),
    )


def standard_placement(
    spread_labels: Mapping[str, str] | None = None, topology_key: str = HOSTNAME_TOPOLOGY_KEY
) -> Placement:
    """Never preemptible nodes. NotIn also matches nodes that lack the label, as standard nodes may."""
    return Placement(
        affinity=_required_affinity("NotIn"),
        topology_spread_constraints=(topology_spread(spread_labels, topology_key),) if spread_labels else (),
    )


def preemptible_first_placement(taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT) -> Placement:
    """Preemptible nodes preferred, standard ones allowed: the scheduler places the pod on a preemptible
    node with room, else on a standard one, at :data:`FALLBACK_PRIORITY_CLASS` (below every other pod, and
    never preempting one), so any pod that needs the standard node takes it back.

    No topology spread: a spread counts the standard nodes too (a preference is not honoured by
    ``nodeAffinityPolicy``), so it would score an empty standard node above a preemptible one with room.
    The descheduler's ``RemovePodsViolatingNodeAffinity`` (preferred) moves a pod back once a preemptible
    node has room again.
    """
    return Placement(
        affinity=_preferred_affinity(),
        tolerations=(toleration_for(taint),) if taint is not None else (),
        priority_class_name=FALLBACK_PRIORITY_CLASS,
    )


def placement_for(
    compute_class: ComputeClass,
    spread_labels: Mapping[str, str] | None = None,
    taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT,
) -> Placement:
    """The placement of a compute class, labelled with it."""
    if compute_class is ComputeClass.PREEMPTIBLE:
        chosen = preemptible_placement(spread_labels, taint)
    elif compute_class is ComputeClass.PREEMPTIBLE_FIRST:
        chosen = preemptible_first_placement(taint)
    else:
        chosen = standard_placement(spread_labels)
    return dataclasses.replace(chosen, compute_class=compute_class)
