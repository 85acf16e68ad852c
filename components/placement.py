"""Where pods go: node affinity, tolerations and topology spread for each compute class (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from together_clusters.platform import (
    COMPUTE_CLASS_LABEL,
    DEFAULT_PREEMPTIBLE_TAINT,
    PREEMPTIBLE,
    ComputeClass,
    Taint,
)

HOSTNAME_TOPOLOGY_KEY = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Placement:
    """The scheduling fields of a pod spec for one compute class."""

    affinity: Mapping[str, Any]
    tolerations: tuple[Mapping[str, Any], ...] = ()
    topology_spread_constraints: tuple[Mapping[str, Any], ...] = field(default=())

    def pod_spec_fields(self) -> dict[str, Any]:
        """The fields to merge into a pod spec; empty lists are left out."""
        fields: dict[str, Any] = {"affinity": _copy(self.affinity)}
        if self.tolerations:
            fields["tolerations"] = [dict(t) for t in self.tolerations]
        if self.topology_spread_constraints:
            fields["topologySpreadConstraints"] = [_copy(c) for c in self.topology_spread_constraints]
        return fields


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value


def _required_affinity(operator: str) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": COMPUTE_CLASS_LABEL, "operator": operator, "values": [PREEMPTIBLE]}
                        ]
                    }
                ]
            }
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


def placement_for(
    compute_class: ComputeClass,
    spread_labels: Mapping[str, str] | None = None,
    taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT,
) -> Placement:
    """The placement of a compute class."""
    if compute_class is ComputeClass.PREEMPTIBLE:
        return preemptible_placement(spread_labels, taint)
    return standard_placement(spread_labels)
