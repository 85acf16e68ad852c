"""The components through the real Pulumi engine: a Cluster on the emulator, manifests rendered to YAML.

The program builds a ``Cluster`` against the emulator and every component, with the Kubernetes provider
chosen by ``provider_from_stack_config`` (stack config ``renderYamlTo``), and exports what each component
rendered. ``up`` must write exactly those objects; a second preview must be clean. Each example under
``examples/`` must also preview cleanly against the emulator.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import _engine
from together_clusters.components import guard

from .helpers import pod_spec

pytestmark = pytest.mark.engine

API_KEY = "tgp_v1_components-e2e-key-0123456789abcdef"

PROGRAM = """\
import json

import pulumi

from together_clusters.components import (
    BatchInference, BatchInferenceArgs, BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs,
    ComputeClass, ContainerSpec, NodePlacement, PodSettings, SharedVolume, Sweep, SweepArgs, TrainingRun,
    TrainingRunArgs, provider_from_stack_config,
)
from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster("gpu", ClusterArgs(cluster_name="components-e2e", region="us-central-8",
                                     gpu_type="RTX_6000_PCI", num_gpus=8, num_preemptible_gpus=16))
kubernetes = pulumi.ResourceOptions(provider=provider_from_stack_config(cluster))
image = "ghcr.io/example/trainer:1"

store = CheckpointStore("ckpt", CheckpointStoreArgs(storage=SharedVolume(claim_name="e2e-ckpt"), namespace="ml"),
                        opts=kubernetes)
after_store = pulumi.ResourceOptions.merge(kubernetes, pulumi.ResourceOptions(depends_on=[store]))
ml = PodSettings(namespace="ml")
serving = PodSettings(namespace="ml", grace_period_seconds=120)  # BatchInference's default grace period
job = BatchJob("ft", BatchJobArgs(container=ContainerSpec(image=image, gpus=8), checkpoint=store.storage, pod=ml),
               opts=after_store)
sweep = Sweep("sweep", SweepArgs(container=ContainerSpec(image=image, gpus=1), trials=({"lr": 1e-4}, {"lr": 3e-4}),
                                 checkpoint=store.storage, pod=ml), opts=after_store)
infer = BatchInference("infer", BatchInferenceArgs(container=ContainerSpec(image=image, gpus=1), pod=serving),
                       opts=kubernetes)
prod = BatchInference("prod", BatchInferenceArgs(container=ContainerSpec(image=image), pod=serving,
                                                 placement=NodePlacement(ComputeClass.STANDARD, critical=True)),
                      opts=kubernetes)
run = TrainingRun("run", TrainingRunArgs(coordinator=ContainerSpec(image=image), worker=ContainerSpec(image=image),
                                         num_workers=2, checkpoint=store.storage, pod=ml,
                                         login=ContainerSpec(image=image)), opts=after_store)

pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("coordinator_host", run.coordinator_host)
pulumi.export("manifests", json.dumps([m for c in (store, job, sweep, infer, prod, run) for m in c.manifests]))
"""


def rendered_objects(directory: Path) -> dict[str, dict[str, Any]]:
    objects = {}
    for path in sorted(directory.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                objects[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return objects


def assert_contains(expected: Any, actual: Any, where: str = "") -> None:
    """Every field of ``expected`` is in ``actual`` with the same value (the provider may add annotations)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        for key, value in expected.items():
            assert key in actual, f"{where}.{key} missing"
            assert_contains(value, actual[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            assert_contains(e, a, f"{where}[{i}]")
    else:
        assert expected == actual, f"{where}: {expected!r} != {actual!r}"


@pytest.fixture(scope="module")
def emulator_url() -> Iterator[str]:
    _engine.require_engine()
    from together_clusters.emulator.server import start_emulator

    # default_driver: the provider does not yet send a driver selector (issue 9, point 10).
    with start_emulator(speed=600, default_driver=True) as running:
        yield running.base_url


def stack_env(workdir: Path, base_url: str) -> dict[str, str]:
    return _engine.engine_env(workdir, extra={"TOGETHER_BASE_URL": base_url, "TOGETHER_API_KEY": API_KEY})


def rendering_stack(
    project: Path, env: dict[str, str], stack: str, render_dir: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``pulumi`` in ``project`` (see ``_engine.pulumi_in``), on new stack ``stack`` rendering its manifests to ``render_dir``."""
    pulumi = _engine.pulumi_in(project, env)
    pulumi("stack", "init", stack)
    pulumi("config", "set", "renderYamlTo", str(render_dir))
    return pulumi


@dataclass(frozen=True)
class RenderedStack:
    """A stack that ``pulumi up`` deployed, its Kubernetes objects rendered to ``render_dir``."""

    pulumi: Callable[..., subprocess.CompletedProcess[str]]
    project: Path
    env: dict[str, str]
    render_dir: Path


@contextmanager
def rendered_up(tmp_path: Path, emulator_url: str, name: str, program: str) -> Iterator[RenderedStack]:
    """The stack ``e2e`` of ``program`` (project ``name``) after a ``pulumi up`` that must succeed, rendering
    to ``tmp_path/rendered``; destroyed on the way out."""
    project = _engine.write_project(tmp_path / "program", name, program)
    env = stack_env(tmp_path, emulator_url)
    render_dir = tmp_path / "rendered"
    pulumi = rendering_stack(project, env, "e2e", render_dir)
    try:
        up = pulumi("up", *_engine.UP_FLAGS, check=False)
        assert up.returncode == 0, _engine.output(up)
        yield RenderedStack(pulumi, project, env, render_dir)
    finally:
        pulumi("destroy", *_engine.UP_FLAGS, check=False)


def test_up_renders_exactly_the_component_manifests(tmp_path: Path, emulator_url: str) -> None:
    with rendered_up(tmp_path, emulator_url, "components-e2e", PROGRAM) as stack:
        outputs = _engine.stack_outputs(stack.project, stack.env)
        assert outputs["coordinator_host"] == "run-coordinator.ml.svc"
        assert outputs["cluster_id"]

        expected = {f"{m['kind']}/{m['metadata']['name']}": m for m in json.loads(outputs["manifests"])}
        rendered = rendered_objects(stack.render_dir)
        assert sorted(rendered) == sorted(expected)
        for key, manifest in expected.items():
            assert_contains(manifest, rendered[key], key)
        assert guard.check_manifests(rendered.values()) == []

        preview = stack.pulumi("preview", *_engine.PREVIEW_FLAGS, "--expect-no-changes", check=False)
        assert preview.returncode == 0, _engine.output(preview)


def test_a_refused_layout_fails_the_preview_with_the_guard_message(tmp_path: Path, emulator_url: str) -> None:
    program = PROGRAM.replace(
        "checkpoint=store.storage, pod=ml),",
        'checkpoint=store.storage, pod=PodSettings(namespace="ml", grace_period_seconds=600)),',
    )
    assert program != PROGRAM
    project = _engine.write_project(tmp_path / "program", "components-e2e-refused", program)
    env = stack_env(tmp_path, emulator_url)
    pulumi = rendering_stack(project, env, "e2e", tmp_path / "r")
    preview = pulumi("preview", *_engine.PREVIEW_FLAGS, check=False)
    assert preview.returncode != 0
    text = preview.stdout + preview.stderr
    assert "BatchJob 'ft' refused by the preemptible placement guard" in text
    assert "terminationGracePeriodSeconds=600" in text
    assert "Traceback" not in text, text[-2000:]


@pytest.mark.parametrize("example", ["finetune", "sweep", "batch_inference", "training_run"])
def test_example_previews(tmp_path: Path, emulator_url: str, example: str) -> None:
    project = _engine.copy_example(example, tmp_path / example)
    env = stack_env(tmp_path, emulator_url)
    pulumi = rendering_stack(project, env, "test", tmp_path / "r")
    preview = pulumi("preview", *_engine.PREVIEW_FLAGS, check=False)
    assert preview.returncode == 0, _engine.output(preview)


def test_a_fleet_of_two_gpu_types_is_refused_at_preview_naming_the_worker(
    tmp_path: Path, emulator_url: str
) -> None:
    """examples/fleet with its western worker on H200s: refused by the real engine's preview, before anything
    is created, in one line naming the field, the value and the fix."""
    project = _engine.copy_example("fleet", tmp_path / "fleet")
    main = project / "__main__.py"
    source = main.read_text()
    patched = source.replace("gpu_type=gpu_type,", 'gpu_type="H200_SXM" if name == "west" else gpu_type,')
    assert patched != source
    main.write_text(patched)
    pulumi = _engine.pulumi_in(project, stack_env(tmp_path, emulator_url))
    pulumi("stack", "init", "test")
    preview = pulumi("preview", *_engine.PREVIEW_FLAGS, check=False)
    assert preview.returncode != 0
    text = preview.stdout + preview.stderr
    assert "error: workers[1] ('west') has gpu_type 'H200_SXM' but 'east' has 'RTX_6000_PCI'" in text, text[-3000:]
    assert "one FleetQueue per GPU type" in text
    assert "Traceback" not in text, text[-3000:]


RENAME_PROGRAM = """\
import pulumi
import pulumi_kubernetes as k8s

from together_clusters.components import BatchJob, BatchJobArgs, ContainerSpec, SharedVolume

config = pulumi.Config()
provider = k8s.Provider("k8s", render_yaml_to_directory=config.require("renderYamlTo"), namespace="team-a")
name = config.get("componentName") or "ft"
aliases = [pulumi.Alias(name=config.get("oldName"))] if config.get("oldName") else []
image = pulumi.Output.from_input("ghcr.io/example/trainer:1").apply(lambda i: i)  # known only at apply time
job = BatchJob(
    name,
    BatchJobArgs(container=ContainerSpec(image=image), checkpoint=SharedVolume(claim_name="c"), job_name="ft"),
    opts=pulumi.ResourceOptions(provider=provider, aliases=aliases),
)
pulumi.export("job_name", job.job_name)
pulumi.export("namespace", job.namespace)
"""


def test_renaming_a_component_with_an_alias_keeps_every_urn_and_the_provider_namespace_applies(
    tmp_path: Path, emulator_url: str
) -> None:
    with rendered_up(tmp_path, emulator_url, "components-rename", RENAME_PROGRAM) as stack:
        (job,) = rendered_objects(stack.render_dir).values()
        assert pod_spec(job)["containers"][0]["image"] == "ghcr.io/example/trainer:1"  # a JobSet's Job
        assert job["metadata"]["namespace"] == "team-a", "the provider's namespace did not apply"
        outputs = _engine.stack_outputs(stack.project, stack.env)
        assert outputs == {"job_name": "ft", "namespace": "team-a"}

        stack.pulumi("config", "set", "componentName", "finetune")
        stack.pulumi("config", "set", "oldName", "ft")
        preview = stack.pulumi("preview", *_engine.PREVIEW_FLAGS, "--expect-no-changes", check=False)
        assert preview.returncode == 0, _engine.output(preview)
