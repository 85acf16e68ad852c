"""Critical pods never run on preemptible nodes, whether or not the platform taints them (it does not
document the taint): a real ``pulumi up`` onto the twin, more critical replicas than the standard node holds,
and the real scheduler deciding where they go."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests import _engine
from together_clusters.emulator.kubernetes.nodes import NodeOptions
from together_clusters.emulator.kubernetes.options import TwinOptions

from ._twin import node_classes, twin_stack, up, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-critical-key-0123456789abcdef"

PROGRAM = """\
from together_clusters.components import BatchInference, BatchInferenceArgs, ContainerSpec, NodePlacement, PodSettings
from together_clusters.components.demo import demo_cluster
from together_clusters.components.platform import ComputeClass
import pulumi

gpu = demo_cluster("critical", num_preemptible_gpus=16)
BatchInference(
    "serve",
    BatchInferenceArgs(
        container=ContainerSpec(image="registry.invalid/serve:1", cpu="100m"),
        replicas=4,  # the scheduler spreads replicas over nodes unless told where they may not go
        deployment_name="serve",
        placement=NodePlacement(ComputeClass.STANDARD, critical=True),
        pod=PodSettings(namespace="default", grace_period_seconds=120),  # BatchInference's default grace period
    ),
    opts=gpu.opts(),
)
pulumi.export("kube_config", gpu.cluster.kube_config)
"""


def running_replicas(core: client.CoreV1Api) -> list[Any] | None:
    """The 4 replicas once they all run, else None."""
    pods = core.list_namespaced_pod("default", label_selector="app.kubernetes.io/managed-by").items
    return pods if len(pods) == 4 and all(p.status.phase == "Running" for p in pods) else None


@pytest.mark.parametrize("taint", [True, False], ids=["tainted", "untainted"])
def test_critical_replicas_run_only_on_the_standard_node(tmp_path: Path, taint: bool) -> None:
    options = TwinOptions(nodes=NodeOptions(preemptible_taint=taint))
    with twin_stack(tmp_path, "twin-critical", PROGRAM, API_KEY, options=options, speed=60) as stack:
        api = up(stack)
        core = client.CoreV1Api(api)
        classes = node_classes(core)
        tainted = {n.metadata.name for n in core.list_node().items if n.spec.taints}
        assert tainted == ({n for n, c in classes.items() if c == "preemptible"} if taint else set())
        assert sorted(classes.values()) == ["preemptible", "preemptible", "standard"]

        # up waits for the Deployment to be accepted, not for its replicas: wait for them here.
        pods = wait_for(lambda: running_replicas(core), "the 4 critical replicas to run")
        assert [classes[p.spec.node_name] for p in pods] == ["standard"] * 4
        api.close()
        destroy = _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=stack.project, env=stack.env)
        assert destroy.returncode == 0, _engine.output(destroy)
