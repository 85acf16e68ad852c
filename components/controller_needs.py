"""Which controllers a component's objects need, and the wait for them (or the error naming the fix).

A component's objects of a kind some controller serves (a JobSet), or whose pods name a PriorityClass the
package installs (``PREEMPTIBLE_FIRST`` pods), wait for the
:class:`~together_clusters.components.ClusterControllers` of their provider. A provider with none (one the
program made itself, or ``provider_for(..., controllers=False)``) has its cluster asked at preview, when its
kubeconfig is known: a needed CRD that is not served (or PriorityClass that is not there) fails the preview with
:class:`~together_clusters.errors.MissingControllerError`, one line naming the component, what it needs and
how to add it. A cluster that cannot be asked is not refused: the API server then says it, at up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from together_clusters.errors import MissingControllerError
from together_clusters.platform import PLACEMENT_LABEL, ComputeClass
from together_clusters.platform.charts import KUEUE, NEEDED_BY_KIND, QUEUE_NAME_LABEL, ChartFacts

from . import kube
from .cluster_controllers import ClusterControllers, stack_identity
from .controllers.detection import Finding, Presence, find, find_priority_class
from .controllers.priorities import PriorityClassFacts, needed_priority_classes
from .guard import pod_templates


class _MissingControllerShownOnOneLine(MissingControllerError, pulumi.RunError):
    """:class:`MissingControllerError` printed as Pulumi prints a ``RunError``: the message, no traceback."""


def needed_charts(manifests: Sequence[Mapping[str, Any]]) -> list[ChartFacts]:
    """The charts whose controllers serve a kind among ``manifests``, and Kueue for an object submitted to a
    queue (without Kueue's webhook it would start at once, unqueued) (pure)."""
    kinds = {str(m.get("kind")) for m in manifests}
    needs = [NEEDED_BY_KIND[kind] for kind in sorted(kinds) if kind in NEEDED_BY_KIND]
    queued = any(QUEUE_NAME_LABEL in ((m.get("metadata") or {}).get("labels") or {}) for m in manifests)
    if queued and KUEUE not in needs:
        needs.append(KUEUE)
    return needs


ADD_THE_INSTALLER = (
    "add ClusterControllers('controllers', opts=pulumi.ResourceOptions(provider=<your provider>)) before it "
    "(from together_clusters.components; in YAML, TypeScript or Go a together:index:ClusterControllers on the "
    "same provider, and dependsOn it), or use provider_for(cluster), or "
)
"""The first fixes of every missing-controller error; what follows says how to do it by hand."""


def the_fix(facts: ChartFacts) -> str:
    """How to give a cluster ``facts``' controller, as the error says it."""
    return f"{ADD_THE_INSTALLER}install {facts.chart_name} {facts.version} yourself"


def the_priority_fix(facts: PriorityClassFacts) -> str:
    """How to give a cluster ``facts``' PriorityClass, as the error says it."""
    return (
        f"{ADD_THE_INSTALLER}create the PriorityClass {facts.name} (value {facts.value}, preemptionPolicy "
        f"{facts.preemption_policy}) yourself"
    )


def _unless_present(
    owner: str, finding: Finding, title: str, what: str, fix: str
) -> MissingControllerError | None:
    if finding.presence is not Presence.ABSENT:
        return None
    return _MissingControllerShownOnOneLine(owner, title, what, fix)


def missing(
    owner: str, facts: ChartFacts, kubeconfig: str | None, this_stack: str
) -> MissingControllerError | None:
    """The error for ``owner`` when the cluster of ``kubeconfig`` does not serve ``facts``' CRD, else ``None``."""
    if facts.crd is None:
        return None
    return _unless_present(
        owner, find(facts.crd, kubeconfig, this_stack), facts.title, facts.crd, the_fix(facts)
    )


def missing_priority_class(
    owner: str, facts: PriorityClassFacts, kubeconfig: str | None, this_stack: str
) -> MissingControllerError | None:
    """The error for ``owner`` when the cluster of ``kubeconfig`` lacks ``facts``' PriorityClass, else ``None``."""
    finding = find_priority_class(facts.name, kubeconfig, this_stack)
    return _unless_present(owner, finding, facts.title, facts.object_path, the_priority_fix(facts))


def move_back_warning(
    owner: str, manifests: Sequence[Mapping[str, Any]], descheduler: bool | None
) -> str | None:
    """The preview warning of ``owner`` whose ``PREEMPTIBLE_FIRST`` pods nothing will move back to preemptible
    nodes (its provider's ClusterControllers has no descheduler, not on purpose), else ``None`` (pure)."""
    if descheduler is not None or not any(
        (found.template.get("metadata") or {}).get("labels", {}).get(PLACEMENT_LABEL)
        == ComputeClass.PREEMPTIBLE_FIRST
        for manifest in manifests
        for found in pod_templates(manifest)
    ):
        return None
    return (
        f"{owner}: its {ComputeClass.PREEMPTIBLE_FIRST} pods that fall back to standard nodes stay there at full "
        "price once preemptible capacity returns, as nothing moves them back: install the descheduler with "
        "provider_for(cluster, controllers=ClusterControllersArgs(descheduler=True)) (or "
        "ClusterControllersArgs(descheduler=False) to say you do not want it)"
    )


def descheduler_asked(opts: pulumi.ResourceOptions | None) -> bool | None:
    """What the provider's ClusterControllers says of the descheduler (``None``: not said). A provider without
    one is taken as having what it needs: its cluster's controllers are the program's business."""
    installer = kube.controllers_of(opts)
    if installer is None:
        return False
    descheduler: bool | None = installer.args.descheduler  # type: ignore[attr-defined]
    return descheduler


def wait_for_controllers(
    owner: str, manifests: Sequence[Mapping[str, Any]], opts: pulumi.ResourceOptions | None
) -> pulumi.Input[Sequence[pulumi.Input[pulumi.Resource]]] | None:
    """What the component's objects must ``depends_on`` for the controllers their kinds need: the
    provider's ClusterControllers, or (none declared) a check of the cluster that raises
    :class:`MissingControllerError`. ``None`` when the objects need no controller."""
    needs = needed_charts(manifests)
    priorities = needed_priority_classes(manifests)
    if not needs and not priorities:
        return None
    controllers = kube.controllers_of(opts)
    if controllers is not None:
        return [controllers]
    explicit = opts.depends_on if opts is not None else None
    if isinstance(explicit, Sequence) and any(isinstance(d, ClusterControllers) for d in explicit):
        return None  # the program waits for its own installer
    provider = kube.kubernetes_provider(opts)
    if provider is None:
        return None  # the ambient configuration: no kubeconfig to ask the cluster with

    this_stack = stack_identity()

    def check(kubeconfig: Any) -> list[pulumi.Resource]:
        known = kubeconfig if isinstance(kubeconfig, str) else None
        if known is None:
            return []
        errors = [missing(owner, facts, known, this_stack) for facts in needs]
        errors += [missing_priority_class(owner, facts, known, this_stack) for facts in priorities]
        for error in errors:
            if error is not None:
                raise error
        return []

    return kube.kubeconfig_of(provider).apply(check, run_with_unknowns=True)
