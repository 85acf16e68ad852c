"""``ContainerSpec.pod_annotations`` reach the pod of that container in every component (how a stack opts its
pods into the twin's local runtime, among other uses); the component's own annotations cannot be overridden."""

from __future__ import annotations

import pytest

from together_clusters.components import manifests
from together_clusters.components.args import (
    BatchInferenceArgs,
    BatchJobArgs,
    ContainerSpec,
    NoCheckpoint,
    Retries,
    SharedVolume,
    SweepArgs,
    TrainingRunArgs,
)
from together_clusters.components.platform import CHECKPOINT_ANNOTATION

RUN_LOCAL = {"twin.together.ai/run": "local"}
OPTED_IN = ContainerSpec(image="trainer:1", command=("python", "-m", "train"), pod_annotations=RUN_LOCAL)
PLAIN = ContainerSpec(image="trainer:1", command=("python", "-m", "store"))
STORE = SharedVolume(claim_name="ckpt")


def templates(objects: list[dict]) -> dict[str, dict]:
    """Each pod template's metadata, by the name of the object holding it."""
    found = {}
    for obj in objects:
        spec = obj.get("spec") or {}
        if obj["kind"] == "JobSet":
            spec = spec["replicatedJobs"][0]["template"]["spec"]
        if "template" in spec:
            found[obj["metadata"]["name"]] = spec["template"]["metadata"]
    return found


def test_every_component_puts_them_on_the_pods_of_that_container() -> None:
    batch = templates(manifests.batch_job("train", BatchJobArgs(container=OPTED_IN, checkpoint=STORE)))
    fresh = templates(
        manifests.batch_job(
            "train",
            BatchJobArgs(container=OPTED_IN, checkpoint=STORE, retries=Retries(fresh_job_per_attempt=True)),
        )
    )
    sweep = templates(
        manifests.sweep("hp", SweepArgs(container=OPTED_IN, trials=({"lr": 1},), checkpoint=STORE))
    )
    inference = templates(manifests.batch_inference("serve", BatchInferenceArgs(container=OPTED_IN)))
    run = templates(
        manifests.training_run(
            "pre", TrainingRunArgs(coordinator=PLAIN, worker=OPTED_IN, num_workers=2, checkpoint=STORE)
        )
    )
    for metadata in (
        batch["train"],
        fresh["train"],
        sweep["hp-0"],
        inference["serve"],
        run["pre-workers-0"],
        run["pre-workers-1"],
    ):
        assert metadata["annotations"] == RUN_LOCAL
    assert "annotations" not in run["pre-coordinator"]  # only the pods of the container that asked


def test_they_join_the_components_own_and_may_not_override_them() -> None:
    declared = templates(
        manifests.batch_job("eval", BatchJobArgs(container=OPTED_IN, checkpoint=NoCheckpoint()))
    )["eval"]["annotations"]
    assert declared == {**RUN_LOCAL, CHECKPOINT_ANNOTATION: "none"}
    clash = ContainerSpec(image="x", pod_annotations={CHECKPOINT_ANNOTATION: "user-managed"})
    with pytest.raises(ValueError, match=CHECKPOINT_ANNOTATION):
        manifests.batch_job("eval", BatchJobArgs(container=clash, checkpoint=NoCheckpoint()))
