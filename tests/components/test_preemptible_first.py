"""PREEMPTIBLE_FIRST on every workload: its pods prefer preemptible nodes, may use standard ones, carry the
fallback priority and say which class they asked for; critical pods never get the fallback priority."""

from __future__ import annotations

from typing import Any

import pytest

from together_clusters.components import (
    BatchInferenceArgs,
    BatchJobArgs,
    ContainerSpec,
    NodePlacement,
    SharedVolume,
    SweepArgs,
    TrainingRunArgs,
    guard,
    manifests,
)
from together_clusters.errors import PlacementRefused
from together_clusters.platform import (
    CRITICAL_LABEL,
    FALLBACK_PRIORITY_CLASS,
    PLACEMENT_LABEL,
    ComputeClass,
)

IMAGE = "ghcr.io/example/trainer:1.0"
SHARED = SharedVolume(claim_name="ckpt")
FIRST = ComputeClass.PREEMPTIBLE_FIRST


def templates(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(object name, pod template) of every pod template the objects hold."""
    return [
        (str(obj["metadata"]["name"]), found.template)
        for obj in objects
        for found in guard.pod_templates(obj)
    ]


RENDERED = {
    "BatchJob": lambda: manifests.batch_job(
        "ft",
        BatchJobArgs(
            container=ContainerSpec(image=IMAGE, gpus=8), checkpoint=SHARED, placement=NodePlacement(FIRST)
        ),
    ),
    "Sweep": lambda: manifests.sweep(
        "lr",
        SweepArgs(
            container=ContainerSpec(image=IMAGE, gpus=8),
            trials=({"lr": 0.1}, {"lr": 0.2}),
            checkpoint=SHARED,
            placement=NodePlacement(FIRST),
        ),
    ),
    "BatchInference": lambda: manifests.batch_inference(
        "score",
        BatchInferenceArgs(container=ContainerSpec(image=IMAGE, gpus=1), placement=NodePlacement(FIRST)),
    ),
}


@pytest.mark.parametrize("component", sorted(RENDERED))
def test_every_pod_of_a_preemptible_first_workload_prefers_preemptible_and_yields_standard(
    component: str,
) -> None:
    objects = RENDERED[component]()
    assert guard.check_manifests(objects) == []  # every preemptible rule holds: it may land there
    pods = templates(objects)
    assert pods
    for _, template in pods:
        spec = template["spec"]
        assert template["metadata"]["labels"][PLACEMENT_LABEL] == "preemptible-first"
        assert spec["priorityClassName"] == FALLBACK_PRIORITY_CLASS
        assert "requiredDuringSchedulingIgnoredDuringExecution" not in spec["affinity"]["nodeAffinity"]
        assert spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    # No budget holds a fallback replica on a standard node against the pods that take it back.
    assert "PodDisruptionBudget" not in {obj["kind"] for obj in objects}


def test_a_training_runs_workers_fall_back_while_its_coordinator_and_login_stay_critical() -> None:
    args = TrainingRunArgs(
        coordinator=ContainerSpec(image=IMAGE),
        worker=ContainerSpec(image=IMAGE, gpus=8),
        num_workers=2,
        checkpoint=SHARED,
        login=ContainerSpec(image=IMAGE),
        worker_compute_class=FIRST,
    )
    objects = manifests.training_run("llm", args)
    assert guard.check_manifests(objects) == []
    by_placement: dict[str, set[str | None]] = {}
    for _, template in templates(objects):
        labels = template["metadata"]["labels"]
        by_placement.setdefault(labels[PLACEMENT_LABEL], set()).add(template["spec"].get("priorityClassName"))
        if labels.get(CRITICAL_LABEL) == "true":
            assert labels[PLACEMENT_LABEL] == "standard"
    assert by_placement == {"preemptible-first": {FALLBACK_PRIORITY_CLASS}, "standard": {None}}


def test_plain_preemptible_and_standard_pods_keep_the_default_priority() -> None:
    for compute_class in (ComputeClass.PREEMPTIBLE, ComputeClass.STANDARD):
        args = BatchJobArgs(
            container=ContainerSpec(image=IMAGE), checkpoint=SHARED, placement=NodePlacement(compute_class)
        )
        for _, template in templates(manifests.batch_job("ft", args)):
            assert "priorityClassName" not in template["spec"]
            assert template["metadata"]["labels"][PLACEMENT_LABEL] == compute_class.value


def test_a_critical_preemptible_first_workload_is_refused_at_plan_time() -> None:
    args = BatchInferenceArgs(
        container=ContainerSpec(image=IMAGE), placement=NodePlacement(FIRST, critical=True)
    )
    with pytest.raises(PlacementRefused) as refused:
        guard.enforce("BatchInference 'serve'", manifests.batch_inference("serve", args))
    message = str(refused.value)
    assert "can be placed on preemptible nodes" in message and "at the fallback priority" in message
    assert "compute_class=ComputeClass.STANDARD" in message


def test_a_hand_written_preemptible_first_pod_without_the_fallback_priority_is_refused() -> None:
    (job_set,) = RENDERED["BatchJob"]()
    for found in guard.pod_templates(job_set):
        del found.template["spec"]["priorityClassName"]
    (violation,) = guard.check_manifest(job_set)
    assert violation.rule == "fallback-priority"
    assert FALLBACK_PRIORITY_CLASS in str(violation) and "\n" not in str(violation)


def test_a_fallback_job_sets_pods_skip_jobsets_priority_label_which_a_negative_priority_breaks() -> None:
    # JobSet's pod webhook labels each pod with its priority; "-100" is not a valid label value.
    for name, template in templates(RENDERED["Sweep"]() + RENDERED["BatchJob"]()):
        assert template["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/node-selector"], name
    plain = BatchJobArgs(container=ContainerSpec(image=IMAGE), checkpoint=SHARED)
    for _, template in templates(manifests.batch_job("ft", plain)):
        assert "alpha.jobset.sigs.k8s.io/node-selector" not in (template["metadata"].get("annotations") or {})
