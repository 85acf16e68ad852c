"""What ``pulumi up`` says of a workload its cluster cannot place: its GPU needs read from the rendered objects,
and the verdict against the Cluster's outputs, as plain data."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from together_clusters.components import (
    BatchInference,
    BatchInferenceArgs,
    BatchJob,
    BatchJobArgs,
    ContainerSpec,
    NodePlacement,
    Retries,
    SharedVolume,
    SweepArgs,
    TrainingRunArgs,
    manifests,
    provider_for,
)
from together_clusters.components.capacity import (
    ClusterCapacity,
    PlacementVerdict,
    gpu_needs,
    placement_verdict,
)
from together_clusters.platform import PLACEMENT_LABEL, ComputeClass
from together_clusters.provider import Cluster, ClusterArgs

from .conftest import RecordingMocks

SHARED = SharedVolume(claim_name="ckpt")
EIGHT = ContainerSpec(image="ghcr.io/example/trainer:1.0", gpus=8)
NONE = ContainerSpec(image="ghcr.io/example/trainer:1.0")
STANDARD, PREEMPTIBLE, FIRST = ComputeClass.STANDARD, ComputeClass.PREEMPTIBLE, ComputeClass.PREEMPTIBLE_FIRST

# --- what each component needs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("objects", "needs"),
    [
        (
            manifests.batch_inference("i", BatchInferenceArgs(container=EIGHT, replicas=3)),
            {PREEMPTIBLE: [8] * 3},
        ),
        (
            manifests.batch_inference(
                "i", BatchInferenceArgs(container=EIGHT, replicas=2, placement=NodePlacement(STANDARD))
            ),
            {STANDARD: [8] * 2},
        ),
        (manifests.batch_job("j", BatchJobArgs(container=EIGHT, checkpoint=SHARED)), {PREEMPTIBLE: [8]}),
        (
            manifests.batch_job(
                "j",
                BatchJobArgs(
                    container=EIGHT,
                    checkpoint=SHARED,
                    parallelism=4,
                    completions=2,
                    retries=Retries(fresh_job_per_attempt=False),
                ),
            ),
            {PREEMPTIBLE: [8] * 2},
        ),
        (
            manifests.sweep(
                "s", SweepArgs(container=EIGHT, trials=({"a": 1}, {"a": 2}, {"a": 3}), checkpoint=SHARED)
            ),
            {PREEMPTIBLE: [8] * 3},
        ),
        (
            manifests.sweep(
                "s",
                SweepArgs(
                    container=EIGHT,
                    trials=({"a": 1}, {"a": 2}, {"a": 3}),
                    checkpoint=SHARED,
                    parallelism=2,
                    retries=Retries(backoff_limit=2, fresh_job_per_attempt=False),
                ),
            ),
            {PREEMPTIBLE: [8] * 2},
        ),
        (
            manifests.training_run(
                "r",
                TrainingRunArgs(
                    coordinator=ContainerSpec(image="c:1", gpus=1),
                    worker=EIGHT,
                    num_workers=2,
                    checkpoint=SHARED,
                ),
            ),
            {STANDARD: [1], PREEMPTIBLE: [8] * 2},
        ),
        (manifests.batch_job("j", BatchJobArgs(container=NONE, checkpoint=SHARED)), {}),
    ],
    ids=[
        "inference",
        "inference-standard",
        "job",
        "job-capped-by-completions",
        "sweep",
        "sweep-parallelism",
        "training-run",
        "no-gpus",
    ],
)
def test_a_workload_needs_the_gpus_of_the_pods_that_run_at_once(
    objects: list[dict[str, Any]], needs: dict
) -> None:
    assert gpu_needs(objects) == needs


def test_preemptible_first_pods_need_preemptible_first_gpus() -> None:
    inference = manifests.batch_inference(
        "i", BatchInferenceArgs(container=EIGHT, replicas=2, placement=NodePlacement(FIRST))
    )
    assert gpu_needs(inference) == {FIRST: [8] * 2}
    run = TrainingRunArgs(
        coordinator=NONE, worker=EIGHT, num_workers=3, checkpoint=SHARED, worker_compute_class=FIRST
    )
    assert gpu_needs(manifests.training_run("r", run)) == {FIRST: [8] * 3}


def test_the_placement_label_decides_over_the_pod_spec() -> None:
    deployment = manifests.batch_inference("i", BatchInferenceArgs(container=EIGHT, replicas=2))[0]
    deployment["spec"]["template"]["metadata"]["labels"][PLACEMENT_LABEL] = STANDARD.value
    assert gpu_needs([deployment]) == {STANDARD: [8] * 2}
    del deployment["spec"]["template"]["metadata"]["labels"][PLACEMENT_LABEL]  # a placement made by hand
    assert gpu_needs([deployment]) == {PREEMPTIBLE: [8] * 2}


def _gpus(limits: int | None = None, requests: int | None = None, **fields: Any) -> dict[str, Any]:
    resources = {k: {"nvidia.com/gpu": str(v)} for k, v in (("limits", limits), ("requests", requests)) if v}
    return {"name": "c", "image": "x", "resources": resources, **fields}


@pytest.mark.parametrize(
    ("spec", "gpus"),
    [
        ({"containers": [_gpus(requests=2)]}, 2),
        ({"initContainers": [_gpus(limits=8)], "containers": [_gpus(limits=1)]}, 8),
        ({"initContainers": [_gpus(limits=1, restartPolicy="Always")], "containers": [_gpus(limits=2)]}, 3),
        ({"overhead": {"nvidia.com/gpu": "1"}, "containers": [_gpus(limits=2)]}, 3),
    ],
    ids=["requests-only", "init-container", "sidecar", "overhead"],
)
def test_a_pods_gpus_are_counted_as_the_scheduler_counts_them(spec: dict[str, Any], gpus: int) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    assert gpu_needs([pod]) == {STANDARD: [gpus]}


# --- the verdict ----------------------------------------------------------------------------------

SHORT = ClusterCapacity.from_outputs(
    {"gpu_type": "H100_SXM", "num_gpus": 8, "desired_preemptible_gpus": 16, "allocated_preemptible_gpus": 0}
)
FULL = ClusterCapacity(
    "H100_SXM", standard_gpus=8, desired_preemptible_gpus=16, allocated_preemptible_gpus=16
)


def verdict(
    needs: dict[ComputeClass, list[int]], capacity: ClusterCapacity | None = SHORT
) -> PlacementVerdict:
    assert capacity is not None
    return placement_verdict("BatchInference 'infer'", needs, capacity)


def test_preemptible_work_with_no_preemptible_gpus_is_warned_of_with_what_the_cluster_has_and_what_to_do() -> (
    None
):
    assert verdict({PREEMPTIBLE: [8]}) == PlacementVerdict(
        warning="BatchInference 'infer' cannot be placed now: it needs 8 preemptible H100_SXM GPUs at once, the "
        "cluster has 0 of its 16 desired preemptible GPUs allocated and 8 standard; what does not fit waits "
        "Pending (pulumi up does not wait for it): wait for the refill, use compute_class=ComputeClass.PREEMPTIBLE_FIRST to run "
        "on idle standard GPUs meanwhile or lower its size"
    )


def test_work_that_fits_is_not_warned_of() -> None:
    assert verdict({PREEMPTIBLE: [8] * 2, STANDARD: [8]}, FULL) == PlacementVerdict()
    assert verdict({}) == PlacementVerdict()


def test_more_than_the_preemptible_target_is_not_told_to_wait_for_a_refill_that_cannot_cover_it() -> None:
    warning = verdict({PREEMPTIBLE: [8] * 3}, FULL).warning
    assert warning is not None
    assert "needs 24 preemptible H100_SXM GPUs" in warning
    assert "wait for the refill" not in warning
    assert "raise the cluster's num_preemptible_gpus" in warning


def test_more_standard_gpus_than_the_cluster_has_is_warned_of() -> None:
    warning = verdict({STANDARD: [8] * 2}, FULL).warning
    assert warning is not None and "needs 16 standard H100_SXM GPUs" in warning
    assert "raise the cluster's num_gpus" in warning and "PREEMPTIBLE_FIRST" not in warning


def test_preemptible_first_work_covered_by_standard_gpus_gets_a_note_of_the_price_not_a_warning() -> None:
    assert verdict({FIRST: [8]}) == PlacementVerdict(
        note="BatchInference 'infer': 8 of its 8 preemptible-first H100_SXM GPUs run on standard GPUs at full "
        "price until preemptible capacity returns (the cluster has 0 of its 16 desired preemptible GPUs "
        "allocated and 8 standard)"
    )
    partly = ClusterCapacity(
        "H100_SXM", standard_gpus=8, desired_preemptible_gpus=16, allocated_preemptible_gpus=8
    )
    assert verdict({FIRST: [8] * 2}, partly).note is not None and "8 of its 16" in str(
        verdict({FIRST: [8] * 2}, partly).note
    )
    assert verdict({FIRST: [8] * 2}, FULL) == PlacementVerdict()


def test_preemptible_first_work_takes_only_the_room_the_workloads_other_pods_leave() -> None:
    # The coordinator's standard GPUs and the workers' preemptible ones come first.
    assert verdict({STANDARD: [8], FIRST: [8]}).warning is not None
    assert verdict({PREEMPTIBLE: [8] * 2, FIRST: [8]}, FULL).note is not None


def test_preemptible_first_work_beyond_both_is_warned_of() -> None:
    warning = verdict({FIRST: [8] * 2}).warning
    assert warning is not None and "needs 16 preemptible-first H100_SXM GPUs" in warning
    assert "wait for the refill" in warning and "PREEMPTIBLE_FIRST to run" not in warning
    beyond = verdict({FIRST: [8] * 4}).warning
    assert beyond is not None and "wait for the refill" not in beyond and beyond.endswith("lower its size")


def test_a_pod_needs_its_gpus_on_one_node() -> None:
    # 15 GPUs of 16 allocated, but three pods of 5 find only two nodes of 8 with room.
    warning = verdict({PREEMPTIBLE: [5, 5, 5]}, FULL).warning
    assert warning is not None and "needs 15 preemptible H100_SXM GPUs" in warning
    assert "raise the cluster's num_preemptible_gpus" in warning  # the refill's two nodes would not take them
    assert verdict({PREEMPTIBLE: [4, 4, 4, 4]}, FULL) == PlacementVerdict()
    assert verdict({PREEMPTIBLE: [3, 3, 5, 5]}, FULL) == PlacementVerdict()  # largest first: 5+3 per node


def test_a_cluster_whose_counts_are_not_known_gives_no_verdict() -> None:
    assert ClusterCapacity.from_outputs({"num_gpus": 8, "desired_preemptible_gpus": None}) is None


# --- an autoscaling cluster (issue 42): it will grow its standard GPUs up to the ceiling ---------------

AUTOSCALING = ClusterCapacity.from_outputs(
    {
        "gpu_type": "H100_SXM",
        "num_gpus": 8,
        "desired_preemptible_gpus": 16,
        "allocated_preemptible_gpus": 16,
        "auto_scale": True,
        "auto_scale_max_gpus": 32,
    }
)


def test_the_ceiling_is_read_from_the_clusters_inputs_only_with_auto_scale() -> None:
    assert AUTOSCALING is not None and AUTOSCALING.autoscale_max_gpus == 32
    # As the engine hands an untyped number back: a float.
    floats = ClusterCapacity.from_outputs(
        {"num_gpus": 8, "desired_preemptible_gpus": 0, "allocated_preemptible_gpus": 0}
        | {"auto_scale": True, "auto_scale_max_gpus": 32.0}
    )
    assert floats is not None and floats.autoscale_max_gpus == 32
    base = {
        "gpu_type": "H100_SXM",
        "num_gpus": 8,
        "desired_preemptible_gpus": 0,
        "allocated_preemptible_gpus": 0,
    }
    for extra in (
        {},
        {"auto_scale": False, "auto_scale_max_gpus": 32},
        {"auto_scale": True, "auto_scale_max_gpus": 8},
    ):
        found = ClusterCapacity.from_outputs(base | extra)
        assert found is not None and found.autoscale_max_gpus is None, extra


def test_standard_work_under_the_ceiling_waits_for_the_platform_to_add_nodes_instead_of_being_short() -> None:
    assert verdict({STANDARD: [8] * 3}, SHORT).warning is not None  # the same work without autoscaling: short
    assert verdict({STANDARD: [8] * 3}, AUTOSCALING) == PlacementVerdict(
        warning="BatchInference 'infer' is waiting for the platform to add nodes: its 24 standard H100_SXM GPUs "
        "at once do not fit on the cluster's 8 standard GPUs now; autoscaling adds standard nodes for its "
        "Pending pods up to 32 (pulumi up does not wait for them)"
    )
    first = verdict({PREEMPTIBLE: [8] * 2, FIRST: [8] * 2}, AUTOSCALING).warning
    assert first is not None and first.startswith(
        "BatchInference 'infer' is waiting for the platform to add nodes"
    )
    assert verdict({STANDARD: [8]}, AUTOSCALING) == PlacementVerdict()


def test_work_past_the_ceiling_is_short_and_preemptible_work_gains_nothing_from_autoscaling() -> None:
    beyond = verdict({STANDARD: [8] * 5}, AUTOSCALING).warning
    assert beyond is not None and beyond.startswith("BatchInference 'infer' cannot be placed now")
    assert "8 standard (autoscaling up to 32)" in beyond and "waiting for the platform" not in beyond
    preemptible = verdict({PREEMPTIBLE: [8] * 3}, AUTOSCALING).warning
    assert preemptible is not None and preemptible.startswith("BatchInference 'infer' cannot be placed now")
    assert "waiting for the platform" not in preemptible
    both = verdict({PREEMPTIBLE: [8] * 3, STANDARD: [8] * 2}, AUTOSCALING).warning
    assert both is not None and "needs 24 preemptible H100_SXM GPUs at once," in both
    assert both.endswith(
        "and it is waiting for the platform to add nodes: its 16 standard H100_SXM GPUs at once "
        "do not fit on the cluster's 8 standard GPUs now; autoscaling adds standard nodes for its "
        "Pending pods up to 32 (pulumi up does not wait for them)"
    )


# --- the component shell, under Pulumi's mocks ------------------------------------------------------


class ClusterOutputMocks(RecordingMocks):
    """The Cluster's live outputs as the platform would report them short of preemptible capacity."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        resource_id, outputs = super().new_resource(args)
        if args.typ.endswith(":Cluster"):
            outputs.update(desired_preemptible_gpus=16, allocated_preemptible_gpus=0, kube_config="")
        return resource_id, outputs


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """What the components said through ``pulumi.log``: (level, message)."""
    messages: list[tuple[str, str]] = []
    monkeypatch.setattr(
        pulumi.log, "warn", lambda message, resource=None, **_: messages.append(("warn", message))
    )
    monkeypatch.setattr(
        pulumi.log, "info", lambda message, resource=None, **_: messages.append(("info", message))
    )
    return messages


def deploy_on(cluster_given: bool) -> None:
    pulumi.runtime.set_mocks(ClusterOutputMocks(), project="capacity-test", stack="test", preview=False)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        cluster = Cluster(
            "gpu",
            ClusterArgs(
                cluster_name="c",
                region="us-central-8",
                gpu_type="H100_SXM",
                num_gpus=8,
                num_preemptible_gpus=16,
            ),
        )
        provider = provider_for(cluster if cluster_given else "apiVersion: v1", controllers=False)
        opts = pulumi.ResourceOptions(provider=provider)
        BatchInference("infer", BatchInferenceArgs(container=EIGHT, replicas=1), opts)
        BatchJob(
            "fallback", BatchJobArgs(container=EIGHT, checkpoint=SHARED, placement=NodePlacement(FIRST)), opts
        )
        return pulumi.Output.from_input(None)

    program()


def test_a_component_on_its_clusters_provider_warns_of_what_it_cannot_place_and_notes_the_fallback(
    said: list[tuple[str, str]],
) -> None:
    deploy_on(cluster_given=True)
    assert sorted(level for level, _ in said) == ["info", "warn"], said
    (warning,) = (m for level, m in said if level == "warn")
    assert warning.startswith(
        "BatchInference 'infer' cannot be placed now: it needs 8 preemptible H100_SXM GPUs"
    )
    (note,) = (m for level, m in said if level == "info")
    assert note.startswith(
        "BatchJob 'fallback': 8 of its 8 preemptible-first H100_SXM GPUs run on standard GPUs"
    )


def test_a_component_on_a_provider_of_a_kubeconfig_says_nothing_of_capacity(
    said: list[tuple[str, str]],
) -> None:
    deploy_on(cluster_given=False)
    assert said == []


def test_on_an_autoscaling_cluster_standard_work_under_the_ceiling_waits_for_nodes(
    said: list[tuple[str, str]],
) -> None:
    pulumi.runtime.set_mocks(ClusterOutputMocks(), project="capacity-test", stack="test", preview=False)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        cluster = Cluster(
            "gpu",
            ClusterArgs(
                cluster_name="c",
                region="us-central-8",
                gpu_type="H100_SXM",
                num_gpus=8,
                auto_scale=True,
                auto_scale_max_gpus=32,
            ),
        )
        opts = pulumi.ResourceOptions(provider=provider_for(cluster, controllers=False))
        standard = BatchInferenceArgs(container=EIGHT, replicas=3, placement=NodePlacement(STANDARD))
        BatchInference("infer", standard, opts)
        return pulumi.Output.from_input(None)

    program()
    assert said == [
        (
            "warn",
            "BatchInference 'infer' is waiting for the platform to add nodes: its 24 standard H100_SXM GPUs at "
            "once do not fit on the cluster's 8 standard GPUs now; autoscaling adds standard nodes for its "
            "Pending pods up to 32 (pulumi up does not wait for them)",
        )
    ]
