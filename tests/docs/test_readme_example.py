"""README's one example is a program that runs: executed as written under Pulumi's mocks (the harness of
``tests/components``), it declares the cluster with both kinds of GPUs and a checkpointed job on its
preemptible nodes, and every object it renders passes the Kubernetes schemas and the preview guard. Its YAML
program for the ``together`` plugin is ``examples/yaml``'s cluster, which the engine tests deploy."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.components.conftest import Program, assert_schema_valid, event_loop_of_the_program, program
from together_clusters.components import guard

README = Path(__file__).resolve().parents[2] / "README.md"

# The component tests' fixtures, used here as they are there.
__all__ = ["event_loop_of_the_program", "program"]


def readme_python() -> str:
    (block,) = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)
    return block


def test_the_readme_example_declares_the_cluster_and_a_checkpointed_job(program: Program) -> None:
    source = readme_python()
    program.run(lambda: exec(compile(source, "README.md", "exec"), {"__name__": "__main__"}))

    (cluster,) = program.by_type("pulumi-python:dynamic")
    assert cluster.inputs["num_gpus"] == 8 and cluster.inputs["num_preemptible_gpus"] == 16
    objects = program.kubernetes_objects()
    assert {"PersistentVolumeClaim/checkpoints", "JobSet/finetune"} <= set(objects), sorted(objects)
    for obj in objects.values():
        assert_schema_valid(obj)
    assert guard.check_manifests(objects.values()) == []


def test_the_readme_yaml_program_is_the_yaml_examples_cluster() -> None:
    """README's program for the ``together`` plugin is ``examples/yaml``'s cluster (which the engine tests
    deploy), with the same outputs among the example's."""
    (block,) = re.findall(r"^```yaml\n(.*?)^```", README.read_text(), re.S | re.M)
    shown = yaml.safe_load(block)
    example = yaml.safe_load((README.parent / "examples" / "yaml" / "Pulumi.yaml").read_text())
    assert shown["runtime"] == example["runtime"] == "yaml"
    cluster = shown["resources"]["gpus"]
    assert cluster["type"] == example["resources"]["gpus"]["type"] == "together:index:Cluster"
    assert cluster["properties"].items() <= example["resources"]["gpus"]["properties"].items()
    assert shown["outputs"].items() <= example["outputs"].items()
