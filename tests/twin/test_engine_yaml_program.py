"""A YAML program on the plugin ``together``, deployed through the real engine onto the twin: a ``Volume``, a
``Cluster`` on it, a ``kubernetes`` provider of its ``kubeConfig``, the ``ClusterControllers`` that install JobSet
from its chart, a ``CheckpointStore`` whose claim binds to the volume, a ``BatchJob`` checkpointing there, and the
cluster's ``RemediationGate``.

What a YAML user relies on (issue 39): ``up`` runs the trainer on a preemptible node with its claim bound to the
shared volume; a change of ``numPreemptibleGpus`` is an update in place (same cluster id, the nodes follow);
``refresh`` then finds nothing changed; ``destroy`` deletes the cluster and keeps the volume (no
``allowDataLoss``) with the checkpoint the pod wrote on it. The gate is given the cluster's ``clusterId`` (an
output) and the API key from secret config: its Deployment has the id, its own Secret the key, and the state
holds the key only encrypted.

Oracles: the real engine and YAML host, the twin's Kubernetes API (the real API server, JobSet's controller),
the emulator's compute API, the volume's folder on disk.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests import _engine
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.emulator.server import start_emulator

from ._programs import IMAGE
from ._twin import COMPUTE_CLASS, DRIVER, GPU, REGION, kube_clients, running_pod, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-yaml-program-0123456789ab"

PROGRAM = f"""resources:
  data:
    type: together:index:Volume
    properties:
      volumeName: yaml-checkpoints
      region: {REGION}
      sizeTib: 1
  gpu:
    type: together:index:Cluster
    properties:
      clusterName: yaml-twin
      region: {REGION}
      gpuType: {GPU}
      numGpus: 8
      numPreemptibleGpus: ${{numPreemptibleGpus}}
      nvidiaVersionId: {DRIVER}
      volumeId: ${{data.volumeId}}
      readyTimeoutMinutes: 5
  k8s:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${{gpu.kubeConfig}}
  controllers:
    type: together:index:ClusterControllers
    options:
      providers:
        - ${{k8s}}
  checkpoints:
    type: together:index:CheckpointStore
    properties:
      storage:
        sharedVolume:
          claimName: ckpt
          size: 1Ti
      volumeName: yaml-checkpoints
    options:
      providers:
        - ${{k8s}}
  train:
    type: together:index:BatchJob
    properties:
      container:
        image: {IMAGE}
        gpus: 8
      checkpoint:
        sharedVolume:
          claimName: ckpt
      pod:
        namespace: default
        gracePeriodSeconds: 60
    options:
      providers:
        - ${{k8s}}
      dependsOn:
        - ${{controllers}}
        - ${{checkpoints}}
  gate:
    type: together:index:RemediationGate
    properties:
      clusterId: ${{gpu.clusterId}}
      modes: [reboot-vm]
      image: registry.invalid/remediation-gate:1
      apiKey: ${{apiKey}}
      baseUrl: ${{baseUrl}}
    options:
      providers:
        - ${{k8s}}
config:
  numPreemptibleGpus:
    type: integer
  apiKey:
    type: string
    secret: true
  baseUrl:
    type: string
outputs:
  clusterId: ${{gpu.clusterId}}
  volumeId: ${{data.volumeId}}
  kubeConfig: ${{gpu.kubeConfig}}
  jobName: ${{train.jobName}}
  installed: ${{controllers.installed}}
  claim: ${{checkpoints.claimName}}
"""


CONTROLLERS = "  controllers:\n    type: together:index:ClusterControllers\n"
KUBECONFIG_PROPERTY = "    properties:\n      kubeconfig: ${gpu.kubeConfig}\n"
"""The controllers told the cluster's kubeconfig: they probe admission themselves (the charts' objects done once
stored). Without it they see the provider by reference only, and the engine waits for each chart object."""


def program(controllers_told_the_kubeconfig: bool) -> str:
    assert CONTROLLERS in PROGRAM
    return (
        PROGRAM.replace(CONTROLLERS, CONTROLLERS + KUBECONFIG_PROPERTY)
        if controllers_told_the_kubeconfig
        else PROGRAM
    )


def _preemptible_nodes(core: client.CoreV1Api) -> int:
    nodes = core.list_node().items
    return sum(
        (n.metadata.labels or {}).get(COMPUTE_CLASS) == "preemptible"
        and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        for n in nodes
    )


@pytest.mark.parametrize("kubeconfig_told", [False, True], ids=["provider-alone", "kubeconfig-told"])
def test_a_yaml_program_deploys_a_batch_job_on_its_cluster_changes_it_in_place_and_destroys_it(
    tmp_path: Path, kubeconfig_told: bool
) -> None:
    from .conftest import require_twin

    _engine.require_engine()
    require_twin()
    with start_emulator(speed=60, kubernetes=TwinOptions()) as emulator:
        project = _engine.write_yaml_project(tmp_path / "project", "yaml-twin", program(kubeconfig_told))
        env = _engine.engine_env(
            tmp_path, extra={"TOGETHER_BASE_URL": emulator.base_url, "TOGETHER_API_KEY": API_KEY}
        )
        pulumi = _engine.pulumi_in(project, env)
        pulumi("stack", "init", "test")
        pulumi("config", "set", "numPreemptibleGpus", "8")
        pulumi("config", "set", "--secret", "apiKey", API_KEY)
        pulumi("config", "set", "baseUrl", emulator.base_url)
        try:
            pulumi("up", *_engine.UP_FLAGS)
            outputs = _engine.stack_outputs(project, env)
            assert outputs["installed"]["jobset"] == "installed", outputs  # by this stack, from its chart
            api = kube_clients(outputs["kubeConfig"])
            core = client.CoreV1Api(api)

            # The trainer runs on a preemptible node, its claim bound to the shared volume's static volume.
            pod: Any = wait_for(
                lambda: running_pod(core, f"jobset.sigs.k8s.io/jobset-name={outputs['jobName']}"),
                "the trainer",
            )
            node = core.read_node(pod.spec.node_name)
            assert node.metadata.labels[COMPUTE_CLASS] == "preemptible"
            claim = core.read_namespaced_persistent_volume_claim("ckpt", "default")
            assert claim.status.phase == "Bound" and claim.spec.volume_name == "yaml-checkpoints"
            # Told the kubeconfig, the component probed admission itself: JobSet's controller Deployment was done
            # once stored; told nothing, the engine waited for it to be ready.
            jobset = client.AppsV1Api(api).read_namespaced_deployment("jobset-controller", "jobset-system")
            waited_for = (jobset.metadata.annotations or {}).get("pulumi.com/waitFor")
            assert (waited_for is not None) == kubeconfig_told, jobset.metadata.annotations

            # The remediation gate of this cluster: its key in its own Secret, in the state only as a secret.
            gate = client.AppsV1Api(api).read_namespaced_deployment("gate", "together-remediation-gate")
            (container,) = gate.spec.template.spec.containers
            gate_env = {e.name: e for e in container.env}
            assert gate_env["TOGETHER_CLUSTER_ID"].value == outputs["clusterId"]
            assert gate_env["TOGETHER_BASE_URL"].value == emulator.base_url
            key = core.read_namespaced_secret("gate-api-key", "together-remediation-gate").data["api-key"]
            assert base64.b64decode(key).decode() == API_KEY
            exported = _engine.run_pulumi(["stack", "export"], cwd=project, env=env, check=True)
            assert API_KEY not in exported.stdout

            # numPreemptibleGpus 8 -> 16: an update in place, the same cluster, a second preemptible node.
            pulumi("config", "set", "numPreemptibleGpus", "16")
            preview = _engine.run_pulumi(["preview", "--json", *_engine.PREVIEW_FLAGS], cwd=project, env=env)
            assert preview.returncode == 0, _engine.output(preview)
            ops = {s["urn"].rsplit("::", 1)[-1]: s["op"] for s in json.loads(preview.stdout)["steps"]}
            assert ops["gpu"] == "update", ops
            assert not {name for name, op in ops.items() if op not in ("same", "update")}, ops
            pulumi("up", *_engine.UP_FLAGS)
            assert _engine.stack_outputs(project, env)["clusterId"] == outputs["clusterId"]
            wait_for(lambda: _preemptible_nodes(core) == 2, "a second preemptible node", timeout=180)

            # A refresh finds nothing changed outside the program; the next preview is empty.
            pulumi("refresh", *_engine.UP_FLAGS)
            pulumi("preview", "--expect-no-changes", *_engine.PREVIEW_FLAGS)
        finally:
            destroy = _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=project, env=env)
        assert destroy.returncode == 0, _engine.output(destroy)
        # The cluster is deleted; the volume, not allowed to lose data, is kept.
        wait_for(
            lambda: not any(c["cluster_name"] == "yaml-twin" for c in emulator.admin.clusters()),
            "the cluster deleted",
        )
        assert outputs["volumeId"] in [v["volume_id"] for v in emulator.admin.volumes()], (
            emulator.admin.volumes()
        )
