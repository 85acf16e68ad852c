"""The shared settings of the workloads' arguments come in groups; the deprecated flat keywords fold into them.

The flat spellings here are deliberate (each warns: see test_args_deprecation.py); use the groups elsewhere.
"""

from __future__ import annotations

import dataclasses

import pytest

from together_clusters.components import (
    BatchInferenceArgs,
    BatchJobArgs,
    ComputeClass,
    ContainerSpec,
    SharedVolume,
    SweepArgs,
    Taint,
    TrainingRunArgs,
    manifests,
)
from together_clusters.components.args import Checkpointing, NodePlacement, PodSettings, Retries

IMAGE = "ghcr.io/example/trainer:latest"
SHARED = SharedVolume(claim_name="ckpt")
TAINT = Taint("gpu.together.ai/spot", "true")
CONTAINER = ContainerSpec(image=IMAGE, gpus=8)


def test_a_batch_job_from_groups_renders_the_same_objects_as_from_flat_keywords() -> None:
    with pytest.warns(DeprecationWarning):
        flat = BatchJobArgs(
            container=CONTAINER,
            checkpoint=SHARED,
            namespace="ml",
            compute_class=ComputeClass.STANDARD,
            critical=True,
            preemptible_taint=TAINT,
            grace_period_seconds=200,
            backoff_limit=5,
            non_retriable_exit_codes=(42,),
            keep_checkpoints=2,
            service_account_name="trainer",
            run_id="ft-1",
            fresh_job_per_attempt=False,
            labels={"team": "ml"},
        )
    grouped = BatchJobArgs(
        container=CONTAINER,
        checkpoint=SHARED,
        placement=NodePlacement(ComputeClass.STANDARD, critical=True, preemptible_taint=TAINT),
        pod=PodSettings(
            namespace="ml", grace_period_seconds=200, service_account_name="trainer", labels={"team": "ml"}
        ),
        retries=Retries(backoff_limit=5, non_retriable_exit_codes=(42,), fresh_job_per_attempt=False),
        checkpointing=Checkpointing(keep_checkpoints=2, run_id="ft-1"),
    )
    assert grouped == flat
    assert manifests.batch_job("ft", grouped) == manifests.batch_job("ft", flat)
    # The flat names still read back, from the groups.
    assert (flat.compute_class, flat.namespace, flat.backoff_limit, flat.run_id) == (
        ComputeClass.STANDARD,
        "ml",
        5,
        "ft-1",
    )


def test_a_sweep_inference_and_training_run_from_groups_render_as_from_flat_keywords() -> None:
    trials = ({"lr": 1e-5}, {"lr": 3e-5})
    with pytest.warns(DeprecationWarning):
        flat_sweep = SweepArgs(CONTAINER, trials, SHARED, backoff_limit_per_index=4, grace_period_seconds=100)
        flat_inference = BatchInferenceArgs(CONTAINER, compute_class=ComputeClass.STANDARD, namespace="serve")
        flat_run = TrainingRunArgs(
            coordinator=CONTAINER,
            worker=CONTAINER,
            num_workers=2,
            checkpoint=SHARED,
            backoff_limit=1,
            run_id="r",
        )
    assert manifests.sweep("s", flat_sweep) == manifests.sweep(
        "s",
        SweepArgs(
            CONTAINER,
            trials,
            SHARED,
            retries=Retries(backoff_limit=4),
            pod=PodSettings(grace_period_seconds=100),
        ),
    )
    assert manifests.batch_inference("i", flat_inference) == manifests.batch_inference(
        "i",
        BatchInferenceArgs(
            CONTAINER,
            placement=NodePlacement(ComputeClass.STANDARD),
            pod=PodSettings(namespace="serve", grace_period_seconds=120),
        ),
    )
    grouped_run = TrainingRunArgs(
        coordinator=CONTAINER,
        worker=CONTAINER,
        num_workers=2,
        checkpoint=SHARED,
        retries=Retries(backoff_limit=1),
        checkpointing=Checkpointing(run_id="r"),
    )
    assert manifests.training_run("run", flat_run) == manifests.training_run("run", grouped_run)


def test_each_workload_keeps_its_own_defaults_in_its_groups() -> None:
    assert BatchInferenceArgs(CONTAINER).pod.grace_period_seconds == 120
    assert SweepArgs(CONTAINER, ({},), SHARED).retries.backoff_limit == 2
    assert BatchJobArgs(CONTAINER, SHARED).retries.backoff_limit == 3


def test_replace_by_a_flat_keyword_changes_that_value_only() -> None:
    args = BatchJobArgs(CONTAINER, SHARED, pod=PodSettings(namespace="ml"), retries=Retries(backoff_limit=5))
    with pytest.warns(DeprecationWarning):
        changed = dataclasses.replace(args, fresh_job_per_attempt=False)
    assert changed.retries == Retries(backoff_limit=5, fresh_job_per_attempt=False)
    assert changed.pod.namespace == "ml"
