"""Placement helpers: affinity, tolerations and topology spread per compute class."""

from __future__ import annotations

from together_clusters.components import guard
from together_clusters.components.placement import placement_for, preemptible_placement, standard_placement
from together_clusters.components.platform import COMPUTE_CLASS_LABEL, ComputeClass, Taint
from together_clusters.platform import FALLBACK_PRIORITY_CLASS, PLACEMENT_LABEL

LABELS = {"app.kubernetes.io/name": "x", "app.kubernetes.io/component": "worker"}


def expressions(fields: dict) -> list[dict]:
    required = fields["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = required["nodeSelectorTerms"]
    result: list[dict] = term["matchExpressions"]
    return result


def test_preemptible_placement() -> None:
    fields = preemptible_placement(LABELS).pod_spec_fields()
    assert expressions(fields) == [{"key": COMPUTE_CLASS_LABEL, "operator": "In", "values": ["preemptible"]}]
    assert fields["tolerations"] == [
        {"key": COMPUTE_CLASS_LABEL, "operator": "Equal", "value": "preemptible", "effect": "NoSchedule"}
    ]
    assert fields["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": LABELS},
            "nodeAffinityPolicy": "Honor",
            "nodeTaintsPolicy": "Honor",
        }
    ]
    assert guard.may_run_on_preemptible(fields)


def test_preemptible_placement_with_a_configured_taint_or_none() -> None:
    custom = preemptible_placement(taint=Taint("pool", "spot", "NoExecute")).pod_spec_fields()
    assert custom["tolerations"] == [
        {"key": "pool", "operator": "Equal", "value": "spot", "effect": "NoExecute"}
    ]
    assert "topologySpreadConstraints" not in custom
    assert "tolerations" not in preemptible_placement(taint=None).pod_spec_fields()


def test_standard_placement_excludes_preemptible_and_admits_unlabelled_nodes() -> None:
    fields = standard_placement(LABELS).pod_spec_fields()
    assert expressions(fields) == [
        {"key": COMPUTE_CLASS_LABEL, "operator": "NotIn", "values": ["preemptible"]}
    ]
    assert "tolerations" not in fields
    assert fields["topologySpreadConstraints"][0]["nodeTaintsPolicy"] == "Honor"
    assert not guard.may_run_on_preemptible({**fields, "tolerations": [{"operator": "Exists"}]})


def test_placement_for_each_class_and_fresh_copies() -> None:
    a = placement_for(ComputeClass.PREEMPTIBLE).pod_spec_fields()
    a["affinity"]["nodeAffinity"] = None
    assert placement_for(ComputeClass.PREEMPTIBLE).pod_spec_fields()["affinity"]["nodeAffinity"] is not None
    assert placement_for(ComputeClass.STANDARD).pod_spec_fields() == standard_placement().pod_spec_fields()
    assert placement_for(ComputeClass.STANDARD).pod_labels() == {PLACEMENT_LABEL: "standard"}


def test_preemptible_first_prefers_preemptible_nodes_allows_standard_ones_and_yields_them() -> None:
    fields = placement_for(ComputeClass.PREEMPTIBLE_FIRST).pod_spec_fields()
    affinity = fields["affinity"]["nodeAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity
    (preference,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preference["weight"] == 100  # the most the API accepts: half price outweighs spread and balance
    assert preference["preference"]["matchExpressions"] == [
        {"key": COMPUTE_CLASS_LABEL, "operator": "In", "values": ["preemptible"]}
    ]
    assert fields["priorityClassName"] == FALLBACK_PRIORITY_CLASS
    assert "topologySpreadConstraints" not in fields  # a spread would score empty standard nodes higher
    # The guard sees a pod that may land on preemptible nodes (so every preemptible rule applies) and on
    # standard ones alike.
    assert guard.may_run_on_preemptible(fields)
    assert placement_for(ComputeClass.PREEMPTIBLE_FIRST).pod_labels() == {
        PLACEMENT_LABEL: "preemptible-first"
    }
    untainted = placement_for(ComputeClass.PREEMPTIBLE_FIRST, taint=None).pod_spec_fields()
    assert "tolerations" not in untainted and guard.may_run_on_preemptible(untainted, None)
