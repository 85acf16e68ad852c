"""Issue 21's proof through the real Pulumi engine and the twin: a stack whose checkpoints live on a ``Volume``
changes ``gpu_type``; ``pulumi up`` replaces the cluster, and a pod on the new cluster sees the checkpoint a
pod of the old one wrote.

Oracles: the stack's outputs (another cluster id), the emulator's storage API (the same volume, attached to
the new cluster) and, on each cluster, the Kubernetes API (the claim bound to the volume's PersistentVolume,
the log of a real process, run by the twin as a local pod, that reads or writes the claim).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from kubernetes import client

from tests import _engine

from ._twin import REGION, pod_log, twin_stack, up, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-shared-volume-0123456789abcdef"

# The cluster both programs replace (stack config ``gpuType``) and the Volume that outlives it.
CLUSTER_ON_VOLUME = f"""\
config = pulumi.Config()
volume = Volume("checkpoints", VolumeArgs(volume_name="checkpoints", region={REGION!r}, size_tib=1))
cluster = Cluster("gpu", ClusterArgs(cluster_name="replaced", region={REGION!r}, gpu_type=config.require("gpuType"),
                                     num_gpus=8, nvidia_version_id="nv-570-cu128-ubuntu2204",
                                     volume_id=volume.volume_id, ready_timeout_minutes=5))
"""

# The pod writes the checkpoint when the volume has none, else reads it; then it stays Running (Ready), so
# pulumi-kubernetes' await of the pod ends. ``deleted_with=cluster``: the pod goes with its cluster. Without
# it the replacement fails: the engine deletes the pod through the Kubernetes provider it is replacing along
# with the cluster, and the call fails "grpc: the client connection is closing" (pulumi/pulumi#14650; seen
# here with Pulumi 3.274.1 and pulumi-kubernetes 4.25.0).
PROGRAM = f"""\
import pulumi
import pulumi_kubernetes as k8s

from together_clusters.components import CheckpointStore, CheckpointStoreArgs, SharedVolume, provider_for
from together_clusters.provider import Cluster, ClusterArgs, Volume, VolumeArgs

{CLUSTER_ON_VOLUME}on_cluster = pulumi.ResourceOptions(provider=provider_for(cluster))
store = CheckpointStore("ckpt", CheckpointStoreArgs(storage=SharedVolume(claim_name="ckpt", size="1Ti")),
                        opts=on_cluster, volume_name="checkpoints")
program = '''
import os, pathlib, time
saved = pathlib.Path(os.environ["CKPT"]) / "run-1" / "step-7.txt"
if saved.exists():
    print("found:", saved.read_text(), flush=True)
else:
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text("step-7 weights")
    print("wrote", flush=True)
time.sleep(3600)
'''
k8s.core.v1.Pod(
    "trainer",
    metadata={{"name": "trainer", "namespace": "default", "annotations": {{"twin.together.ai/run": "local"}}}},
    spec={{
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "containers": [{{"name": "main", "image": "registry.invalid/trainer:1", "command": ["python", "-c", program],
                        "env": [{{"name": "CKPT", "value": "/ckpt"}}],
                        "volumeMounts": [{{"name": "ckpt", "mountPath": "/ckpt"}}]}}],
        "volumes": [{{"name": "ckpt", "persistentVolumeClaim": {{"claimName": "ckpt"}}}}],
    }},
    opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[store], deleted_with=cluster)),
)
pulumi.export("kube_config", cluster.kube_config)
pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("volume_id", volume.volume_id)
"""


def trainer_log(api: client.ApiClient) -> str | None:
    return pod_log(client.CoreV1Api(api), "trainer", container="main") or None


def test_a_gpu_type_change_replaces_the_cluster_and_the_new_clusters_pod_sees_the_checkpoint(
    tmp_path: Path,
) -> None:
    with twin_stack(tmp_path, "twin-shared-volume", PROGRAM, API_KEY, speed=60) as stack:
        stack.set_config("gpuType", "H100_SXM")
        first = up(stack)
        before = _engine.stack_outputs(stack.project, stack.env)
        claim = client.CoreV1Api(first).read_namespaced_persistent_volume_claim("ckpt", "default")
        assert claim.status.phase == "Bound" and claim.spec.volume_name == "checkpoints"
        assert wait_for(lambda: trainer_log(first), "the first pod's log").strip() == "wrote"

        stack.set_config("gpuType", "H200_SXM")
        second = up(stack)
        after = _engine.stack_outputs(stack.project, stack.env)
        assert after["cluster_id"] != before["cluster_id"], "the cluster was not replaced"
        assert after["volume_id"] == before["volume_id"]
        volume = httpx.get(
            f"{stack.emulator.base_url}/v1/compute/clusters/storage/volumes/{after['volume_id']}",
            headers={"Authorization": f"Bearer {API_KEY}"},
        ).json()
        assert volume["status"] == "bound"
        found = wait_for(lambda: trainer_log(second), "the new cluster's pod's log")
        assert found.strip() == "found: step-7 weights"


# The components need no deleted_with of their own: on a provider_for(cluster) provider their objects go with
# the cluster. A claim the code lets go (allow_data_loss=True) is deleted, not retained, so without that
# default its delete would go through the provider being replaced and fail as above.
COMPONENT_PROGRAM = f"""\
import pulumi

from together_clusters.components import CheckpointStore, CheckpointStoreArgs, SharedVolume, provider_for
from together_clusters.provider import Cluster, ClusterArgs, Volume, VolumeArgs

{CLUSTER_ON_VOLUME}store = CheckpointStore("ckpt", CheckpointStoreArgs(storage=SharedVolume(claim_name="ckpt", size="1Ti")),
                        opts=pulumi.ResourceOptions(provider=provider_for(cluster)), volume_name="checkpoints",
                        allow_data_loss=True)
pulumi.export("kube_config", cluster.kube_config)
pulumi.export("cluster_id", cluster.cluster_id)
"""


def test_a_components_objects_go_with_their_replaced_cluster_without_a_deleted_with(tmp_path: Path) -> None:
    with twin_stack(tmp_path, "twin-replaced-component", COMPONENT_PROGRAM, API_KEY, speed=60) as stack:
        stack.set_config("gpuType", "H100_SXM")
        up(stack)
        before = _engine.stack_outputs(stack.project, stack.env)["cluster_id"]
        stack.set_config("gpuType", "H200_SXM")
        second = up(stack)  # failed "grpc: the client connection is closing" deleting the claim
        assert _engine.stack_outputs(stack.project, stack.env)["cluster_id"] != before
        claim = client.CoreV1Api(second).read_namespaced_persistent_volume_claim("ckpt", "default")
        assert claim.spec.volume_name == "checkpoints"
