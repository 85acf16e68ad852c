"""The PriorityClasses the components' pods name, as plain data (pure): what ClusterControllers installs, and
which of them a component's objects need.

One class today, :data:`~together_clusters.platform.FALLBACK_PRIORITY_CLASS`: ``PREEMPTIBLE_FIRST`` pods run
at it, below every other pod and never preempting one, so a pod on a standard node only as a fallback yields
that node to any pod that wants it (the scheduler preempts it: ``DisruptionTarget`` with reason
``PreemptionByScheduler``, which the components' pod failure policy ignores). A pod naming a PriorityClass
that does not exist is refused by the API server, so the components' objects wait for it like a controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from together_clusters.platform import FALLBACK_PRIORITY, FALLBACK_PRIORITY_CLASS

from ..guard import pod_templates


@dataclass(frozen=True)
class PriorityClassFacts:
    """One PriorityClass the package owns."""

    name: str
    value: int
    preemption_policy: str
    description: str

    @property
    def title(self) -> str:
        """How an error names it."""
        return f"the PriorityClass {self.name}"

    @property
    def object_path(self) -> str:
        """The object the cluster is asked for, as an error names it."""
        return f"priorityclasses.scheduling.k8s.io/{self.name}"


FALLBACK = PriorityClassFacts(
    name=FALLBACK_PRIORITY_CLASS,
    value=FALLBACK_PRIORITY,
    preemption_policy="Never",
    description=(
        "together-clusters: PREEMPTIBLE_FIRST pods on standard nodes only while preemptible capacity is short; "
        "below every other pod and never preempting one"
    ),
)

PRIORITY_CLASSES: Mapping[str, PriorityClassFacts] = {FALLBACK.name: FALLBACK}
"""Every PriorityClass the package installs, by name."""


def priority_class_manifest(facts: PriorityClassFacts) -> dict[str, Any]:
    """The PriorityClass object (never the cluster's default)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": facts.name},
        "value": facts.value,
        "preemptionPolicy": facts.preemption_policy,
        "globalDefault": False,
        "description": facts.description,
    }


def needed_priority_classes(manifests: Iterable[Mapping[str, Any]]) -> list[PriorityClassFacts]:
    """The package's PriorityClasses that pods among ``manifests`` name."""
    named = {
        (found.template.get("spec") or {}).get("priorityClassName")
        for manifest in manifests
        for found in pod_templates(manifest)
    }
    return [PRIORITY_CLASSES[name] for name in sorted(PRIORITY_CLASSES) if name in named]
