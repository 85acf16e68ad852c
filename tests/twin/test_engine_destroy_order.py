"""``pulumi destroy`` of a stack whose ``CheckpointStore(allow_data_loss=True)`` claim a workload uses: the
workload depends on the store, so the engine deletes the workload first, and pulumi-kubernetes waits until
its pods are gone (their grace period spent saving) before the claim is deleted. The stack makes its own
Kubernetes provider: on a ``provider_for(cluster)`` provider the components' objects are ``deleted_with`` the
cluster, so a destroy deletes the cluster and skips them; here they are deleted one by one, as they are when
they leave a program whose cluster stays.

Oracles: watches of the cluster's pods and claims through the Kubernetes API (when the claim was asked to go,
when the last pod was gone) and the file the real process (a local pod) wrote in its grace period.

Measured (2 cores, Pulumi 3.274.1, pulumi-kubernetes 4.25.0, JobSet v0.11.0), seconds after the destroy's
start: the pod deleting at 20.3-22.1 (how long the JobSet's delete took to reach the pod; not
investigated), saved at 22.5-24.2, gone at 22.6-24.3, the claim deleting at 22.7-24.4: 40-50 ms after the pod.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests import _engine

from ._twin import REGION, pod_log, running_pod, twin_stack, up, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-destroy-order-0123456789abcdef"
SAVE_SECONDS = 2.0
"""Real seconds the process spends saving after SIGTERM (its grace period lasts 300/60 = 5 s)."""

TRAINER = f"""
import os, pathlib, signal, time
folder = pathlib.Path(os.environ["CHECKPOINT_DIR"])
folder.mkdir(parents=True, exist_ok=True)
def save(*_):
    time.sleep({SAVE_SECONDS})
    (folder / "saved-at").write_text(repr(time.time()))
    raise SystemExit(0)
signal.signal(signal.SIGTERM, save)
print("training", flush=True)
while True:
    time.sleep(0.1)
"""

PROGRAM = f"""\
import pulumi

from together_clusters.components import (
    BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs, ClusterControllers, ContainerSpec, PodSettings,
    SharedVolume,
)
from together_clusters.provider import Cluster, ClusterArgs, Volume, VolumeArgs
import pulumi_kubernetes as k8s

volume = Volume("checkpoints", VolumeArgs(volume_name="checkpoints", region={REGION!r}, size_tib=1))
cluster = Cluster("gpu", ClusterArgs(cluster_name="destroy-order", region={REGION!r}, gpu_type="H100_SXM",
                                     num_gpus=8, num_preemptible_gpus=8, nvidia_version_id="nv-570-cu128-ubuntu2204",
                                     volume_id=volume.volume_id, ready_timeout_minutes=5))
on_cluster = pulumi.ResourceOptions(provider=k8s.Provider("k8s", kubeconfig=cluster.kube_config))
# A provider of the user's own: the controllers the BatchJob needs are declared by hand (provider_for would).
ClusterControllers("controllers", opts=on_cluster, kubeconfig=cluster.kube_config)
store = CheckpointStore("ckpt", CheckpointStoreArgs(storage=SharedVolume(claim_name="ckpt", size="1Ti")),
                        opts=on_cluster, volume_name="checkpoints", allow_data_loss=True)
BatchJob("train", BatchJobArgs(
    container=ContainerSpec(image="registry.invalid/train:1", command=("python", "-c", {TRAINER!r}), gpus=8,
                            pod_annotations={{"twin.together.ai/run": "local"}}),
    checkpoint=store.storage, job_name="train", pod=PodSettings(namespace="default")),
    opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[store])))
pulumi.export("kube_config", cluster.kube_config)
"""


class Timeline:
    """When (this machine's clock) the claim was first seen deleting, and when each pod was first seen
    deleting and then gone."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.claim_deleting_at: float | None = None
        self.pods_deleting_at: dict[str, float] = {}
        self.pods_gone_at: dict[str, float] = {}
        self._stop = threading.Event()
        # Each watch starts at the revision of a list made here, so no change after this returns is missed
        # (no sleep for the watches to be listening).
        for lister, seen in (
            (self.core.list_namespaced_persistent_volume_claim, self._claim_seen),
            (self.core.list_namespaced_pod, self._pod_seen),
        ):
            version = lister("default").metadata.resource_version
            threading.Thread(target=self._follow, args=(lister, seen, version), daemon=True).start()

    def _claim_seen(self, kind: str, obj: Any) -> None:
        deleting = kind == "DELETED" or getattr(obj.metadata, "deletion_timestamp", None) is not None
        if deleting and self.claim_deleting_at is None:
            self.claim_deleting_at = time.time()

    def _pod_seen(self, kind: str, obj: Any) -> None:
        if obj.metadata.deletion_timestamp is not None:
            self.pods_deleting_at.setdefault(obj.metadata.name, time.time())
        if kind == "DELETED":
            self.pods_gone_at.setdefault(obj.metadata.name, time.time())

    def _follow(self, lister: Callable[..., Any], seen: Callable[[str, Any], None], version: str) -> None:
        while not self._stop.is_set():
            try:
                stream = watch.Watch().stream(lister, "default", resource_version=version, timeout_seconds=30)
                for event in stream:
                    seen(event["type"], event["object"])
                    version = event["object"].metadata.resource_version
            except (ApiException, urllib3.exceptions.HTTPError):
                return  # the cluster is gone

    def stop(self) -> None:
        self._stop.set()


def test_destroy_deletes_the_claim_only_after_the_workloads_pods_finished_saving(tmp_path: Path) -> None:
    with twin_stack(tmp_path, "twin-destroy-order", PROGRAM, API_KEY, speed=60) as stack:
        api = up(stack)
        core = client.CoreV1Api(api)
        pod = wait_for(
            lambda: running_pod(core, "jobset.sigs.k8s.io/jobset-name=train"), "the trainer running"
        )
        claim: Any = core.read_namespaced_persistent_volume_claim("ckpt", "default")
        volume: Any = core.read_persistent_volume(claim.spec.volume_name)
        folder = Path(volume.spec.host_path.path)
        wait_for(
            lambda: "training" in pod_log(core, pod.metadata.name),
            "its log",
        )
        timeline = Timeline(api)
        destroy_started = time.time()
        result = _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=stack.project, env=stack.env)
        assert result.returncode == 0, _engine.output(result)
        timeline.stop()
        saved = [float(p.read_text()) for p in folder.rglob("saved-at")]
        assert saved, f"the trainer saved nothing in its grace period under {folder}"
        assert timeline.claim_deleting_at is not None, "the claim was never deleted"
        print(
            f"after the destroy's start: pods deleting at "
            f"{[round(t - destroy_started, 2) for t in timeline.pods_deleting_at.values()]} s, saved at "
            f"+{saved[0] - destroy_started:.2f} s, pods gone at "
            f"{[round(t - destroy_started, 2) for t in timeline.pods_gone_at.values()]} s, claim deleting at "
            f"+{timeline.claim_deleting_at - destroy_started:.2f} s"
        )
        assert timeline.pods_gone_at, "no pod was seen going"
        assert max(saved) < timeline.claim_deleting_at
        assert max(timeline.pods_gone_at.values()) <= timeline.claim_deleting_at
