"""An autoscaling cluster under the real engine on the twin (issue 42): GPU pods Pending for lack of GPUs make
the platform add standard nodes, the nodes go once the pods finish, and throughout neither
``pulumi preview --expect-no-changes`` nor ``together-clusters drift`` reports the platform's own scaling.

Oracles: the API server (Nodes, pod phases) and the engine's own preview and refresh through the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

from tests import _engine

from ._twin import Stack, kube_clients, together_clusters_cli, twin_stack, wait_for
from .test_autoscaling import gpu_pod

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-autoscaling-key-0123456789abcdef"

PROGRAM = """\
import pulumi

from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster(
    "scaling",
    ClusterArgs(
        cluster_name="scaling",
        region="us-central-8",
        gpu_type="H100_SXM",
        num_gpus=8,
        nvidia_version_id="nv-570-cu128-ubuntu2204",
        auto_scale=True,
        auto_scale_max_gpus=24,
        ready_timeout_minutes=10,
    ),
)
pulumi.export("kube_config", cluster.kube_config)
pulumi.export("standard_nodes", cluster.standard_nodes)
"""


def assert_no_change(stack: Stack, when: str) -> None:
    preview = _engine.run_pulumi(
        ["preview", *_engine.PREVIEW_FLAGS, "--refresh", "--expect-no-changes"],
        cwd=stack.project,
        env=stack.env,
    )
    assert preview.returncode == 0, f"{when}: {_engine.output(preview)}"
    drift = together_clusters_cli(stack.project, stack.env, "drift", "--json", timeout=600)
    assert drift.returncode == 0, f"{when}: {drift.stdout[-3000:]}{drift.stderr[-3000:]}"
    (report,) = json.loads(drift.stdout)["stacks"]
    assert report["drift"] == [] and report["missing"] == [], report


def test_the_platforms_scaling_is_never_a_change_to_undo(tmp_path: Path) -> None:
    with twin_stack(tmp_path, "twin-autoscaling", PROGRAM, API_KEY) as stack:
        result = _engine.run_pulumi(["up", *_engine.UP_FLAGS], cwd=stack.project, env=stack.env)
        assert result.returncode == 0, _engine.output(result)
        api = kube_clients(_engine.stack_outputs(stack.project, stack.env)["kube_config"])
        core = client.CoreV1Api(api)

        def standard_nodes() -> int:
            return sum(1 for n in core.list_node().items if "preemptible" not in n.metadata.name)

        assert standard_nodes() == 1
        for i in range(3):
            core.create_namespaced_pod("default", gpu_pod(f"train-{i}", run_for="40s"))
        wait_for(lambda: standard_nodes() == 3 or None, "the platform to add two standard nodes", timeout=180)
        assert_no_change(stack, "grown to the ceiling")

        pods: dict[str, tuple[str, str | None]] = {}

        def all_succeeded() -> bool | None:
            pods.clear()
            pods.update(
                {
                    p.metadata.name: (p.status.phase, p.spec.node_name)
                    for p in core.list_namespaced_pod("default").items
                }
            )
            return [phase for phase, _ in pods.values()].count("Succeeded") == 3 or None

        try:
            wait_for(all_succeeded, "the three pods to succeed", timeout=240)
        except AssertionError as timed_out:
            nodes = [n.metadata.name for n in core.list_node().items]
            raise AssertionError(f"{timed_out}; pods (phase, node): {pods}; nodes: {nodes}") from None
        wait_for(lambda: standard_nodes() == 1 or None, "the added nodes to go once idle", timeout=240)
        assert_no_change(stack, "shrunk back to the floor")
