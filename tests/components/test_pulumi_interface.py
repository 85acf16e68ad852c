"""The Pulumi interface: Inputs resolved by the engine, the provider's namespace, container options,
outputs read from the created objects."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from together_clusters.components import (
    BatchJob,
    BatchJobArgs,
    ContainerSpec,
    PodSettings,
    Retries,
    SharedVolume,
    TrainingRun,
    TrainingRunArgs,
)
from together_clusters.components.args import DataVolume, Probe, SecretEnv

from .conftest import Program, RecordingMocks, assert_schema_valid
from .helpers import env_of, env_values, main_container, pod_spec

IMAGE = "ghcr.io/example/trainer:1.0"
SHARED = SharedVolume(claim_name="ckpt")


def resolved(output: pulumi.Output[Any]) -> Any:
    """The value of an Output once the mocked engine has resolved it (inside a ``Program.run``)."""
    box: dict[str, Any] = {}
    output.apply(lambda v: box.setdefault("value", v))
    return box


def test_outputs_as_namespace_and_image_are_resolved_not_stringified(program: Program) -> None:
    namespace = pulumi.Output.from_input("ml")
    image = pulumi.Output.from_input("ghcr.io/example/trainer@sha256:abc")

    def build() -> None:
        TrainingRun(
            "run",
            TrainingRunArgs(
                coordinator=ContainerSpec(image=image),
                worker=ContainerSpec(image=image, env={"DATA_NS": namespace}),  # type: ignore[dict-item]
                num_workers=2,
                checkpoint=SHARED,
                pod=PodSettings(namespace=namespace),  # type: ignore[arg-type]
            ),
        )

    program.run(build)
    objects = program.kubernetes_objects()
    text = repr(objects)
    assert "Calling __str__" not in text and "@@" not in text
    workers = objects["JobSet/run-workers-1"]
    assert workers["metadata"]["namespace"] == "ml"
    assert main_container(workers)["image"] == "ghcr.io/example/trainer@sha256:abc"
    assert env_values(workers)["COORDINATOR_HOST"] == "run-coordinator.ml.svc"
    assert env_values(workers)["DATA_NS"] == "ml"
    assert env_values(workers)["CHECKPOINT_DIR"].startswith("/checkpoints/run/run-")
    (replicated,) = workers["spec"]["replicatedJobs"]
    assert_schema_valid(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "w"}, **replicated["template"]}
    )


def checkpoint_dir_for(image: Any) -> str:
    program = Program()
    program.run(lambda: BatchJob("ft", BatchJobArgs(container=ContainerSpec(image=image), checkpoint=SHARED)))
    return env_values(program.kubernetes_objects()["JobSet/ft"])["CHECKPOINT_DIR"]


def test_the_run_key_follows_an_image_known_only_at_apply_time() -> None:
    first = checkpoint_dir_for(pulumi.Output.from_input("trainer:1"))
    assert first == checkpoint_dir_for(pulumi.Output.from_input("trainer:1"))
    assert first != checkpoint_dir_for(pulumi.Output.from_input("trainer:2"))


class ProviderNamespaceMocks(RecordingMocks):
    """Like pulumi-kubernetes: an object without a namespace lands in the provider's namespace."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        resource_id, outputs = super().new_resource(args)
        if args.typ.startswith("kubernetes:") and "metadata" in outputs:
            outputs["metadata"] = {"namespace": "team-a", **outputs["metadata"]}
        return resource_id, outputs


def test_without_a_namespace_objects_take_the_providers_and_outputs_say_so() -> None:
    program = Program()
    program.mocks = ProviderNamespaceMocks()
    pulumi.runtime.set_mocks(program.mocks, project="components-test", stack="test", preview=False)
    seen: dict[str, Any] = {}

    def build() -> None:
        job = BatchJob(
            "ft", BatchJobArgs(container=ContainerSpec(image=IMAGE), checkpoint=SHARED, job_name="ft-7")
        )
        seen["namespace"] = resolved(job.namespace)
        seen["job_name"] = resolved(job.job_name)

    program.run(build)
    (job,) = program.kubernetes_objects().values()
    assert "namespace" not in job["metadata"], "the component pinned a namespace"
    assert seen["namespace"] == {"value": "team-a"}
    assert seen["job_name"] == {"value": "ft-7"}


def test_container_options_real_jobs_need(program: Program) -> None:
    container = ContainerSpec(
        image=IMAGE,
        command=("python", "-m", "finetune", "--dataset", "/data/chat"),
        gpus=8,
        cpu="32",
        memory="256Gi",
        memory_limit="300Gi",
        resources={"rdma/ib": "1", "ephemeral-storage": "200Gi"},
        secret_env={
            "HF_TOKEN": SecretEnv(secret="hf", key="token"),
            "WANDB_API_KEY": SecretEnv("wandb", "key"),
        },
        volumes=(
            DataVolume(name="data", mount_path="/data", claim_name="datasets"),
            DataVolume(name="cache", mount_path="/root/.cache", claim_name="hf-cache", read_only=False),
        ),
        shm_size="64Gi",
        image_pull_secrets=("ghcr",),
        ports={"metrics": 9090},
        readiness_probe=Probe(http_path="/healthz", port=9090),
        liveness_probe=Probe(command=("cat", "/tmp/alive"), period_seconds=30),
    )
    program.run(lambda: BatchJob("ft", BatchJobArgs(container=container, checkpoint=SHARED)))
    job = program.kubernetes_objects()["JobSet/ft"]
    assert_schema_valid(job)
    spec = pod_spec(job)
    main = main_container(job)
    assert env_of(job)["HF_TOKEN"] == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}},
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"] == {"claimName": "datasets", "readOnly": True}
    assert volumes["dshm"] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}
    assert "checkpoints" in volumes
    mounts = {m["mountPath"]: m for m in main["volumeMounts"]}
    assert mounts["/data"]["readOnly"] is True and mounts["/root/.cache"]["readOnly"] is False
    assert mounts["/dev/shm"]["name"] == "dshm"
    assert spec["imagePullSecrets"] == [{"name": "ghcr"}]
    assert main["resources"] == {
        "requests": {"cpu": "32", "memory": "256Gi"},
        "limits": {"memory": "300Gi", "rdma/ib": "1", "ephemeral-storage": "200Gi", "nvidia.com/gpu": "8"},
    }
    assert main["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 9090}
    assert main["livenessProbe"]["exec"] == {"command": ["cat", "/tmp/alive"]}


@pytest.mark.parametrize(
    ("container", "message"),
    [
        (ContainerSpec(IMAGE, volumes=(DataVolume("d", "/d"),)), "give exactly one of claim_name"),
        (ContainerSpec(IMAGE, volumes=(DataVolume("checkpoints", "/x", claim_name="c"),)), "are taken"),
        (ContainerSpec(IMAGE, readiness_probe=Probe(http_path="/h")), "give http_path with port"),
        (ContainerSpec(IMAGE, resources={"nvidia.com/gpu": "8"}), "use gpus=8"),
        (ContainerSpec(IMAGE, env={"A": "1"}, secret_env={"A": SecretEnv("s", "k")}), "secret_env sets A"),
    ],
)
def test_contradictory_container_options_are_refused_at_preview(
    container: ContainerSpec, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Program().run(lambda: BatchJob("ft", BatchJobArgs(container=container, checkpoint=SHARED)))


@pytest.mark.parametrize("fresh", [True, False], ids=["job-set-per-trial", "indexed-job"])
def test_a_sweep_with_an_image_known_only_at_apply_time_gets_real_per_trial_keys(
    program: Program, fresh: bool
) -> None:
    import json
    import re

    from together_clusters.components import Sweep, SweepArgs

    image = pulumi.Output.from_input("trainer@sha256:feed")
    args = SweepArgs(
        ContainerSpec(image=image),  # type: ignore[arg-type]
        ({"lr": 1}, {"lr": 2}),
        SHARED,
        retries=Retries(backoff_limit=2, fresh_job_per_attempt=fresh),
    )
    program.run(lambda: Sweep("s", args))
    objects = program.kubernetes_objects()
    if fresh:
        keys = [env_values(objects[f"JobSet/s-{i}"])["CHECKPOINT_DIR"].rsplit("/", 1)[1] for i in range(2)]
    else:
        (config_map,) = [o for k, o in objects.items() if k.startswith("ConfigMap/")]
        keys = json.loads(config_map["data"]["checkpoint-keys.json"])
    assert all(re.fullmatch(r"trial-\d-run-[0-9a-f]{12}", k) for k in keys), keys
    assert keys[0] != keys[1]
