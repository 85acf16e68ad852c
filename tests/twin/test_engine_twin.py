"""pulumi-kubernetes through the real Pulumi engine against the twin: the kubeconfig a Cluster outputs is
all a program needs to run real Kubernetes objects (no ``renderYamlTo``); every example stack, deployed so,
survives a preemption drill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests import _engine
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions
from together_clusters.emulator.server import start_emulator

from ._twin import COMPUTE_CLASS, drill_twin, kube_clients, wait_for
from .conftest import require_twin

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-engine-key-0123456789abcdef"

PROGRAM = """\
import pulumi
import pulumi_kubernetes as k8s

from together_clusters.components import provider_for
from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster("gpu", ClusterArgs(cluster_name="engine-twin", region="us-central-8", gpu_type="H100_SXM",
                                     num_gpus=8, num_preemptible_gpus=16))
on_cluster = pulumi.ResourceOptions(provider=provider_for(cluster))
ns = k8s.core.v1.Namespace("ns", metadata={"name": "work"}, opts=on_cluster)
in_ns = pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[ns]))
claim = k8s.core.v1.PersistentVolumeClaim(
    "shared", metadata={"name": "shared", "namespace": "work"},
    spec={"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}}}, opts=in_ns)
labels = {"app": "server"}
k8s.apps.v1.Deployment(
    "server", metadata={"name": "server", "namespace": "work"},
    spec={
        "replicas": 2,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "nodeSelector": {"together.ai/compute-class": "preemptible"},
                "tolerations": [{"key": "together.ai/compute-class", "operator": "Equal",
                                 "value": "preemptible", "effect": "NoSchedule"}],
                "containers": [{"name": "main", "image": "registry.invalid/server:1",
                                "resources": {"limits": {"nvidia.com/gpu": "8"}},
                                "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]}],
                "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": "shared"}}],
            },
        },
    },
    opts=pulumi.ResourceOptions.merge(in_ns, pulumi.ResourceOptions(depends_on=[claim])))
pulumi.export("kube_config", cluster.kube_config)
"""


def test_pulumi_kubernetes_runs_a_deployment_on_the_twin_with_the_clusters_kubeconfig(tmp_path: Path) -> None:
    _engine.require_engine()
    require_twin()
    with start_emulator(speed=600, kubernetes=TwinOptions()) as emulator:
        project = _engine.write_project(tmp_path / "prog", "twin-engine", PROGRAM)
        env = _engine.engine_env(
            tmp_path, extra={"TOGETHER_BASE_URL": emulator.base_url, "TOGETHER_API_KEY": API_KEY}
        )
        _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env, check=True)
        up = _engine.run_pulumi(["up", *_engine.UP_FLAGS], cwd=project, env=env)
        assert up.returncode == 0, _engine.output(up)

        kubeconfig = _engine.stack_outputs(project, env)["kube_config"]
        api = kube_clients(kubeconfig)
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        deployment = apps.read_namespaced_deployment("server", "work")
        assert deployment.status.ready_replicas == 2  # pulumi-kubernetes waited for it
        pods = core.list_namespaced_pod("work", label_selector="app=server").items
        nodes = {n.metadata.name: n.metadata.labels[COMPUTE_CLASS] for n in core.list_node().items}
        assert sorted(nodes[p.spec.node_name] for p in pods) == ["preemptible", "preemptible"]
        assert len({p.spec.node_name for p in pods}) == 2  # one 8-GPU pod per 8-GPU node
        claim = core.read_namespaced_persistent_volume_claim("shared", "work")
        assert claim.status.phase == "Bound" and claim.status.access_modes == ["ReadWriteMany"]

        preview = _engine.run_pulumi(
            ["preview", *_engine.PREVIEW_FLAGS, "--expect-no-changes"], cwd=project, env=env
        )
        assert preview.returncode == 0, _engine.output(preview)
        api.close()
        # Destroying deletes the objects, then the cluster, whose control plane goes with it.
        destroy = _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=project, env=env)
        assert destroy.returncode == 0, _engine.output(destroy)
        wait_for(lambda: not emulator.platform.twin.status(), "the cluster's control plane to stop")


@pytest.fixture(scope="module")
def examples_emulator():
    _engine.require_engine()
    require_twin()
    with start_emulator(speed=600, kubernetes=TwinOptions()) as emulator:
        yield emulator


@pytest.mark.parametrize("example", ["finetune", "sweep", "batch_inference", "training_run"])
def test_example_runs_its_kubernetes_objects_on_the_twin(
    tmp_path: Path, examples_emulator, example: str
) -> None:
    project = _engine.copy_example(example, tmp_path / example)
    env = _engine.engine_env(
        tmp_path,
        extra={"TOGETHER_BASE_URL": examples_emulator.base_url, "TOGETHER_API_KEY": f"{API_KEY}-{example}"},
    )
    _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env, check=True)
    up = _engine.run_pulumi(["up", *_engine.UP_FLAGS], cwd=project, env=env)  # no renderYamlTo: real objects
    assert up.returncode == 0, _engine.output(up)

    [cluster] = httpx.get(
        f"{examples_emulator.base_url}/v1/compute/clusters",
        headers={"Authorization": f"Bearer {API_KEY}-{example}"},
        timeout=30,
    ).json()["clusters"]
    api = kube_clients(cluster["kube_config"])
    core = client.CoreV1Api(api)
    classes = {n.metadata.name: n.metadata.labels[COMPUTE_CLASS] for n in core.list_node().items}
    if example == "finetune":
        # What the example reads and its user owns: the dataset claim and the Hugging Face token.
        core.create_namespaced_persistent_volume_claim(
            "default",
            {
                "metadata": {"name": "datasets"},
                "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
            },
        )
        core.create_namespaced_secret(
            "default", {"metadata": {"name": "hf-token"}, "stringData": {"token": "t"}}
        )

    def all_running() -> list[Any] | None:
        # The example's pods (the components' label), not those of the controllers its stack installed.
        pods = core.list_pod_for_all_namespaces(label_selector="app.kubernetes.io/managed-by=pulumi").items
        pods = [p for p in pods if p.metadata.namespace != "kube-system"]
        # The workloads on preemptible nodes too: a JobSet is made only once the controllers the stack
        # installs answer, so its pods may come after the rest have started.
        on_preemptible = any(classes.get(p.spec.node_name) == "preemptible" for p in pods if p.spec.node_name)
        running = pods and all(p.status.phase == "Running" for p in pods)
        return pods if running and on_preemptible else None

    pods = wait_for(all_running, f"the pods of {example} to run")
    # Nodes may have joined while the pods started (a refill): classes as they are now.
    classes = {n.metadata.name: n.metadata.labels[COMPUTE_CLASS] for n in core.list_node().items}
    for pod in pods:
        wanted = (pod.spec.node_selector or {}).get(COMPUTE_CLASS)
        critical = (pod.metadata.labels or {}).get("together.ai/critical") == "true"
        if critical:
            assert classes[pod.spec.node_name] == "standard", pod.metadata.name
        elif wanted:
            assert classes[pod.spec.node_name] == wanted, pod.metadata.name
    claims = core.list_persistent_volume_claim_for_all_namespaces().items
    assert all(c.status.phase == "Bound" for c in claims)

    # Then drilled: a preemptible node running the example's pods is reclaimed, and every workload that had
    # pods there gets a replacement running (drill_twin asserts the report is ok).
    target = next(p.spec.node_name for p in pods if classes[p.spec.node_name] == "preemptible")
    admin = AdminClient(examples_emulator.base_url)
    try:
        report = drill_twin(api, admin, examples_emulator.base_url, TerminationMode.EVICTION, target)
    finally:
        admin.close()
    assert report.workloads, f"the drill found no workload of {example} on {report.node}"
    still_critical = [
        p
        for p in core.list_pod_for_all_namespaces(label_selector="together.ai/critical=true").items
        if p.status.phase == "Running"
    ]
    assert all(classes[p.spec.node_name] == "standard" for p in still_critical)
    api.close()
    destroy = _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=project, env=env)
    assert destroy.returncode == 0, _engine.output(destroy)
