"""Issue 24's "scarcity visible and consistent" for ``pulumi up``: with no preemptible capacity in the region
when the cluster is created, a real ``pulumi up`` of a preemptible BatchInference and a BatchJob returns
without waiting for their pods (which stay Pending: the Deployment's readiness is not awaited either) and
warns of each one, naming what it needs, what the cluster has and what to do; a ``PREEMPTIBLE_FIRST`` BatchJob
that the standard node covers gets a note of the price instead.

Oracles: the engine's output, and the real Deployment and Job controllers' and scheduler's objects read with
the ``kubernetes`` client after ``up`` returned.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes import client

from tests import _engine
from together_clusters.components.demo import DEFAULT_GPU_TYPE, DEFAULT_REGION
from together_clusters.emulator.kubernetes.options import TwinOptions

from ._twin import kube_clients, twin_stack

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-scarcity-key-0123456789abcdef"

PROGRAM = """\
import pulumi

from together_clusters.components import BatchInference, BatchInferenceArgs, BatchJob, BatchJobArgs
from together_clusters.components import ContainerSpec, NoCheckpoint, NodePlacement, PodSettings, Retries
from together_clusters.components.demo import demo_cluster
from together_clusters.platform import ComputeClass

gpu = demo_cluster("scarce", num_preemptible_gpus=16)
BatchInference(
    "infer",
    BatchInferenceArgs(
        container=ContainerSpec(image="registry.invalid/serve:1", gpus=8),
        replicas=1,
        deployment_name="infer",
        pod=PodSettings(namespace="default", grace_period_seconds=120),  # BatchInference's default grace period
    ),
    opts=gpu.opts(),
)
# One plain Job (no JobSet controller to wait for) each: preemptible, and preemptible-first.
for name, compute_class in (("job", ComputeClass.PREEMPTIBLE), ("fallback", ComputeClass.PREEMPTIBLE_FIRST)):
    BatchJob(
        name,
        BatchJobArgs(
            container=ContainerSpec(image="registry.invalid/train:1", gpus=8),
            checkpoint=NoCheckpoint(),
            job_name=name,
            placement=NodePlacement(compute_class),
            pod=PodSettings(namespace="default"),
            retries=Retries(fresh_job_per_attempt=False),
        ),
        opts=gpu.opts(),
    )
pulumi.export("kube_config", gpu.cluster.kube_config)
"""

WHAT_THE_CLUSTER_HAS = (
    f"needs 8 preemptible {DEFAULT_GPU_TYPE} GPUs at once, the cluster has 0 of its 16 desired preemptible GPUs "
    "allocated and 8 standard"
)


def test_up_short_of_preemptible_gpus_returns_and_warns_of_each_workload_it_cannot_place(
    tmp_path: Path,
) -> None:
    # JobSet pre-installed: the provider's ClusterControllers finds it and installs nothing (not this test's subject).
    with twin_stack(tmp_path, "twin-scarcity", PROGRAM, API_KEY, options=TwinOptions(jobset=True)) as stack:
        stack.emulator.admin.set_capacity(DEFAULT_REGION, DEFAULT_GPU_TYPE, 0)
        started = time.monotonic()
        result = _engine.run_pulumi(["up", *_engine.UP_FLAGS], cwd=stack.project, env=stack.env)
        took = time.monotonic() - started
        shown = _engine.output(result)
        assert result.returncode == 0, shown
        print(f"pulumi up short of capacity: {took:.1f} s")

        api = kube_clients(_engine.stack_outputs(stack.project, stack.env)["kube_config"])
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        # up returned while the workers still wait for capacity: it did not wait for them.
        assert not apps.read_namespaced_deployment_status("infer", "default").status.available_replicas
        for workload in ("infer", "job"):
            pods = core.list_namespaced_pod(
                "default", label_selector=f"app.kubernetes.io/name={workload}"
            ).items
            assert len(pods) == 1 and pods[0].status.phase == "Pending", pods
        api.close()

        # The Diagnostics section: one line per workload (the progress lines repeat them).
        warnings = [line for line in map(str.strip, shown.splitlines()) if line.startswith("warning: ")]
        # The demo's controllers have no descheduler: the preemptible-first job is told nothing moves it back.
        (moved_back,) = [w for w in warnings if "nothing moves them back" in w]
        assert "BatchJob 'fallback'" in moved_back, moved_back
        warnings.remove(moved_back)
        assert len(warnings) == 2, shown
        for subject, warning in zip(
            ("BatchInference 'infer'", "BatchJob 'job'"), sorted(warnings), strict=True
        ):
            assert subject in warning and WHAT_THE_CLUSTER_HAS in warning, warning
            assert "wait for the refill" in warning and "ComputeClass.PREEMPTIBLE_FIRST" in warning, warning
        # The preemptible-first job fits on the standard node: a note of the price, not a warning.
        assert (
            f"BatchJob 'fallback': 8 of its 8 preemptible-first {DEFAULT_GPU_TYPE} GPUs run on standard GPUs "
            "at full price until preemptible capacity returns"
        ) in shown
