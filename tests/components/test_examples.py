"""Each example program runs under Pulumi's mocks: the Cluster, the provider choice and the components."""

from __future__ import annotations

import runpy
from pathlib import Path

import pulumi
import pytest

from together_clusters.components import guard

from .conftest import Program, assert_schema_valid
from .helpers import pod_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

EXPECTED = {
    "finetune": {"PersistentVolumeClaim/finetune-checkpoints", "JobSet/finetune"},
    "sweep": {"PersistentVolumeClaim/sweep-checkpoints", *(f"JobSet/lr-sweep-{i}" for i in range(6))},
    "batch_inference": {
        "Deployment/batch-infer",
        "Deployment/serving",
        "PodDisruptionBudget/serving",
    },
    "training_run": {
        "PersistentVolumeClaim/pretrain-checkpoints",
        "Service/pretrain-coordinator",
        "Job/pretrain-coordinator",
        *(f"JobSet/pretrain-workers-{rank}" for rank in range(4)),
        "Service/pretrain-workers",
        "Deployment/pretrain-login",
    },
}


def run_example(program: Program, example: str, config: dict[str, str]) -> None:
    project = f"together-{example.replace('_', '-')}"
    pulumi.runtime.set_mocks(program.mocks, project=project, stack="test", preview=False)
    for key, value in config.items():
        pulumi.runtime.set_config(f"{project}:{key}", value)
    try:
        program.run(lambda: runpy.run_path(str(EXAMPLES / example / "__main__.py"), run_name="__main__"))
    finally:
        for key in config:
            pulumi.runtime.config.CONFIG.get().pop(f"{project}:{key}", None)


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_example_renders_to_a_directory_when_asked(program: Program, example: str, tmp_path: Path) -> None:
    run_example(program, example, {"renderYamlTo": str(tmp_path)})
    (cluster,) = [r for r in program.mocks.registered if r.typ.startswith("pulumi-python:dynamic")]
    assert cluster.inputs["num_gpus"] == 8
    (k8s_provider,) = program.by_type("pulumi:providers:kubernetes")
    assert k8s_provider.inputs.get("renderYamlToDirectory") == str(tmp_path)
    objects = program.kubernetes_objects()
    assert {k for k in objects if not k.startswith("ConfigMap/")} == EXPECTED[example]
    for obj in objects.values():
        assert_schema_valid(obj)
    assert guard.check_manifests(objects.values()) == []
    for child in program.by_type("kubernetes:"):
        assert child.provider is not None and "::k8s::" in child.provider


def test_example_uses_the_cluster_kubeconfig_otherwise(program: Program) -> None:
    run_example(program, "finetune", {})
    (k8s_provider,) = program.by_type("pulumi:providers:kubernetes")
    assert "renderYamlToDirectory" not in k8s_provider.inputs


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, ("ft-test", "us-central-8")),
        ({"clusterName": "mine", "region": "eu-west-1"}, ("mine", "eu-west-1")),
    ],
)
def test_example_cluster_comes_from_stack_config(
    program: Program, config: dict[str, str], expected: tuple[str, str]
) -> None:
    run_example(program, "finetune", config)
    (cluster,) = [r for r in program.mocks.registered if r.typ.startswith("pulumi-python:dynamic")]
    assert cluster.name == "gpu"
    assert (cluster.inputs["cluster_name"], cluster.inputs["region"]) == expected
    assert cluster.inputs["num_preemptible_gpus"] == 16


def test_the_finetune_dataset_path_is_mounted(program: Program, tmp_path: Path) -> None:
    run_example(program, "finetune", {"renderYamlTo": str(tmp_path), "datasetClaim": "chat-data"})
    job = program.kubernetes_objects()["JobSet/finetune"]
    container = pod_spec(job)["containers"][0]
    dataset = container["command"][container["command"].index("--dataset") + 1]
    (mount,) = [m for m in container["volumeMounts"] if dataset.startswith(m["mountPath"].rstrip("/") + "/")]
    (volume,) = [v for v in pod_spec(job)["volumes"] if v["name"] == mount["name"]]
    assert volume["persistentVolumeClaim"]["claimName"] == "chat-data"
