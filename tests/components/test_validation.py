"""A workload's arguments are checked in one step: every problem in one error, each on a line of its own."""

from __future__ import annotations

import pytest

from together_clusters.components import (
    BatchInferenceArgs,
    BatchJob,
    BatchJobArgs,
    Checkpointing,
    ContainerSpec,
    NodePlacement,
    Retries,
    SharedVolume,
    Sweep,
    SweepArgs,
    TrainingRunArgs,
    manifests,
)
from together_clusters.components.args import DataVolume, Probe
from together_clusters.errors import ArgsError, PlacementRefused

from .conftest import Program

IMAGE = "ghcr.io/example/trainer:latest"
SHARED = SharedVolume(claim_name="ckpt")


def test_two_independent_problems_of_a_batch_job_are_reported_in_one_error() -> None:
    args = BatchJobArgs(
        container=ContainerSpec(IMAGE), checkpoint=SHARED, completions=0, retries=Retries(backoff_limit=-1)
    )
    with pytest.raises(ArgsError) as refused:
        manifests.batch_job("ft", args)
    message = str(refused.value)
    assert "backoff_limit must be >= 0, got -1" in message
    assert "completions must be >= 1, got 0" in message
    assert len(refused.value.violations) == 2
    assert {v.field for v in refused.value.violations} == {"backoff_limit", "completions"}


def test_every_problem_of_a_container_and_of_the_run_comes_at_once_from_the_component() -> None:
    container = ContainerSpec(
        IMAGE,
        env={"CHECKPOINT_DIR": "/x"},
        volumes=(DataVolume("d", "/d"),),
        readiness_probe=Probe(http_path="/h"),
        resources={"nvidia.com/gpu": "8"},
    )
    args = BatchJobArgs(
        container=container,
        checkpoint=SHARED,
        retries=Retries(non_retriable_exit_codes=(0,)),
        checkpointing=Checkpointing(run_id="a/b"),
    )
    with pytest.raises(ArgsError) as refused:
        Program().run(lambda: BatchJob("ft", args))
    message = str(refused.value)
    assert message.startswith("BatchJob 'ft': invalid arguments:\n")
    for words in (
        "CHECKPOINT_DIR, which the component sets itself",
        "give exactly one of claim_name",
        "give http_path with port",
        "use gpus=8",
        "0 is success",
        "run_id='a/b'",
    ):
        assert words in message
    # One line per violation, each naming the field at fault.
    lines = message.splitlines()[1:]
    assert len(lines) == len(refused.value.violations) == 6
    assert all(line.startswith("  - ") for line in lines)


def test_the_problems_of_a_sweep_and_a_training_run_are_gathered_too() -> None:
    sweep = SweepArgs(
        ContainerSpec(IMAGE), ({"lr": 1}, {"lr": 2}), SHARED, parallelism=1, max_failed_indexes=1
    )
    with pytest.raises(ArgsError) as refused:
        Sweep("s", sweep)
    assert {v.field for v in refused.value.violations} == {"parallelism", "max_failed_indexes"}
    run = TrainingRunArgs(
        coordinator=ContainerSpec(IMAGE),
        worker=ContainerSpec(IMAGE),
        num_workers=2,
        checkpoint=SHARED,
        min_workers=3,
        max_restarts=0,
    )
    with pytest.raises(ArgsError) as refused:
        manifests.training_run("run", run)
    assert {v.field for v in refused.value.violations} == {"min_workers", "max_restarts"}


def test_validate_lists_argument_problems_else_the_guards_refusals() -> None:
    from together_clusters.components.validation import validate

    inference = BatchInferenceArgs(ContainerSpec(IMAGE), replicas=0, pre_stop_seconds=5)
    assert {v.field for v in validate("i", inference)} == {"replicas", "pre_stop_seconds"}
    critical = BatchJobArgs(
        container=ContainerSpec(IMAGE), checkpoint=SHARED, placement=NodePlacement(critical=True)
    )
    assert [v.rule for v in validate("ft", critical)] == ["critical-on-preemptible"]
    assert validate("ft", BatchJobArgs(container=ContainerSpec(IMAGE), checkpoint=SHARED)) == []


def test_a_guard_refusal_is_still_placement_refused_an_args_error() -> None:
    args = BatchJobArgs(
        container=ContainerSpec(IMAGE), checkpoint=SHARED, placement=NodePlacement(critical=True)
    )
    with pytest.raises(PlacementRefused) as refused:
        Program().run(lambda: BatchJob("ft", args))
    assert isinstance(refused.value, ArgsError)
