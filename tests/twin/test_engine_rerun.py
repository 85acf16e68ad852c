"""A rerun after a killed ``pulumi up`` of a component succeeds: no field-manager conflict with the
interrupted run.

pulumi-kubernetes applies server-side under a field manager named at random per run. An ``up`` SIGKILLed
while it waited for a Deployment (a cancelled CI job) left the Deployment in the cluster, owned by that
run's manager, and not in the state; the next ``up`` changed one of its fields and failed with
``conflict with "pulumi-kubernetes-<hex>"`` until everything was destroyed. The oracle is the real engine
and the twin's real API server (its server-side apply and field managers).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import urllib3
from kubernetes import client

from tests import _engine

from ._twin import kube_clients, twin_stack, up, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-rerun-key-0123456789abcdef"

PROGRAM = """\
import pulumi

from together_clusters.components import kube, provider_for
from together_clusters.provider import Cluster, ClusterArgs

config = pulumi.Config()
cluster = Cluster("gpu", ClusterArgs(cluster_name="rerun", region="us-central-8", gpu_type="H100_SXM",
                                     num_gpus=8, nvidia_version_id="nv-570-cu128-ubuntu2204"))
labels = {"app": "worker"}
deployment = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "worker", "namespace": "default"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                # Set to a label no node has, the Deployment never gets ready: `up` waits on it.
                "nodeSelector": {"together.ai/compute-class": config.require("computeClass")},
                "containers": [{"name": "main", "image": "registry.invalid/worker:1",
                                "env": [{"name": "QUEUE_URL", "value": config.require("queueUrl")}]}],
            },
        },
    },
}
kube.create("worker", deployment, pulumi.ResourceOptions(provider=provider_for(cluster)))
pulumi.export("kube_config", cluster.kube_config)
"""


def test_an_up_killed_while_waiting_for_a_deployment_is_rerun_without_a_field_manager_conflict(
    tmp_path: Path,
) -> None:
    with twin_stack(tmp_path, "rerun", PROGRAM, API_KEY, speed=600) as stack:
        stack.set_config("computeClass", "nowhere")
        stack.set_config("queueUrl", "http://queue-a")
        with _engine.up_killed_on_exit(stack.project, stack.env):
            apps = wait_for(lambda: _apps_once_the_deployment_exists(stack), "the Deployment", timeout=300)

        stack.set_config("computeClass", "standard")
        stack.set_config("queueUrl", "http://queue-b")
        apps = client.AppsV1Api(up(stack))
        container = apps.read_namespaced_deployment("worker", "default").spec.template.spec.containers[0]
        assert [(e.name, e.value) for e in container.env] == [("QUEUE_URL", "http://queue-b")]


def _apps_once_the_deployment_exists(stack) -> client.AppsV1Api | None:
    """The cluster's apps API once the interrupted run has applied the Deployment (None before)."""
    clusters = stack.emulator.admin.clusters()
    if not clusters or not clusters[0].get("kube_config"):
        return None
    apps = client.AppsV1Api(kube_clients(clusters[0]["kube_config"]))
    try:
        apps.read_namespaced_deployment("worker", "default")
    except (client.ApiException, urllib3.exceptions.HTTPError):  # not made yet, or the API not answering yet
        return None
    time.sleep(1)  # well inside the wait for the Deployment to be ready, which never comes
    return apps
