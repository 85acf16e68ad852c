"""A Together shared volume inside the twin: a static PersistentVolume of the volume's name in every cluster it
is attached to, backed by a folder of the volume's own, so a cluster that replaces another (same
``volume_id``) sees the files the first one's pods wrote.

Oracles: the API server (the PV's spec, the claim bound by the real PV controller, pod phases and logs) and
real processes (local pods) writing and reading the claim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from together_clusters.emulator.server import RunningEmulator

from ._twin import REGION, TwinCluster, wait_for
from .test_local_runtime import local_pod, log_of, phase

pytestmark = pytest.mark.twin

API_KEY = "twin-shared-volumes"
VOLUMES = "/v1/compute/clusters/storage/volumes"
VOLUME_NAME = "checkpoints"
CHECKPOINT = "step-7 weights"


def claim(name: str = "ckpt") -> dict[str, Any]:
    """A claim bound to the shared volume's PV, as ``CheckpointStore(volume_name=...)`` makes it."""
    return {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "1Ti"}},
            "volumeName": VOLUME_NAME,
            "storageClassName": "",
        },
    }


def on_claim(name: str, program: str) -> dict[str, Any]:
    """A local pod running ``program`` with the claim at ``/ckpt`` (its path in ``$CKPT``), the checkpoint's
    text in ``$CHECKPOINT``."""
    return local_pod(
        name,
        program,
        env=[{"name": "CKPT", "value": "/ckpt"}, {"name": "CHECKPOINT", "value": CHECKPOINT}],
        volumes=[{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}],
        mounts=[{"name": "ckpt", "mountPath": "/ckpt"}],
    )


def bound(cluster: TwinCluster) -> Any:
    found = cluster.core.read_namespaced_persistent_volume_claim("ckpt", "default")
    return found if found.status.phase == "Bound" else None


def test_a_replaced_cluster_attached_to_the_same_volume_sees_the_files(
    twin_emulator: RunningEmulator,
) -> None:
    http = httpx.Client(
        base_url=twin_emulator.base_url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30
    )
    created = http.post(
        VOLUMES,
        json={"volume_name": VOLUME_NAME, "region": REGION, "size_tib": 2, "is_lifecycle_independent": True},
    )
    assert created.status_code == 200, created.text
    volume_id = created.json()["volume_id"]

    with TwinCluster.create(twin_emulator, "volume-a", API_KEY, num_gpus=8, volume_id=volume_id) as first:
        first.wait_for_nodes(standard=1, preemptible=0)
        pv = wait_for(lambda: next(iter(first.core.list_persistent_volume().items), None), "the volume's PV")
        assert pv.metadata.name == VOLUME_NAME
        assert pv.spec.access_modes == ["ReadWriteMany"]
        assert pv.spec.capacity == {"storage": "2Ti"}
        assert (
            not pv.spec.storage_class_name
        )  # "" is stored as absent: no class, only a claim naming it binds
        assert pv.spec.persistent_volume_reclaim_policy == "Retain"

        first.core.create_namespaced_persistent_volume_claim("default", claim())
        wait_for(lambda: bound(first), "the claim bound to the volume's PV")
        writer = """\
            import os
            os.makedirs(os.path.join(os.environ["CKPT"], "run-1"), exist_ok=True)
            with open(os.path.join(os.environ["CKPT"], "run-1", "step-7.txt"), "w") as out:
                out.write(os.environ["CHECKPOINT"])
        """
        first.core.create_namespaced_pod("default", on_claim("writer", writer))
        done = wait_for(lambda: phase(first, "default", "writer", "Succeeded", "Failed"), "the writer's end")
        assert done.status.phase == "Succeeded"

    # The volume is free again once the first cluster is gone (a volume is attached to one live cluster).
    wait_for(
        lambda: http.get(f"{VOLUMES}/{volume_id}").json()["status"] == "available",
        "the volume detached from the deleted cluster",
    )
    with TwinCluster.create(
        twin_emulator, "volume-b", API_KEY, num_gpus=8, gpu_type="H200_SXM", volume_id=volume_id
    ) as second:
        second.wait_for_nodes(standard=1, preemptible=0)
        wait_for(lambda: second.core.list_persistent_volume().items, "the volume's PV on the new cluster")
        second.core.create_namespaced_persistent_volume_claim("default", claim())
        wait_for(lambda: bound(second), "the claim bound on the new cluster")
        reader = """\
            import os, sys
            with open(os.path.join(os.environ["CKPT"], "run-1", "step-7.txt")) as saved:
                text = saved.read()
            print("read:", text)
            sys.exit(0 if text == os.environ["CHECKPOINT"] else 3)
        """
        second.core.create_namespaced_pod("default", on_claim("reader", reader))
        done = wait_for(lambda: phase(second, "default", "reader", "Succeeded", "Failed"), "the reader's end")
        assert wait_for(lambda: log_of(second, "default", "reader", "read:"), "the reader's log").strip() == (
            f"read: {CHECKPOINT}"
        )
        assert done.status.phase == "Succeeded"

        # A volume grown through the storage API: its PV shows the new size.
        grown = http.put(VOLUMES, json={"volume_id": volume_id, "size_tib": 3})
        assert grown.status_code == 200, grown.text
        wait_for(
            lambda: second.core.read_persistent_volume(VOLUME_NAME).spec.capacity == {"storage": "3Ti"},
            "the PV grown with the volume",
        )
        folder = Path(second.core.read_persistent_volume(VOLUME_NAME).spec.host_path.path)
        assert (folder / "run-1" / "step-7.txt").read_text() == CHECKPOINT

    # Deleted through the storage API, the volume takes its files with it (no folder left behind).
    wait_for(
        lambda: http.get(f"{VOLUMES}/{volume_id}").json()["status"] == "available",
        "the volume detached from the second cluster",
    )
    deleted = http.delete(f"{VOLUMES}/{volume_id}")
    assert deleted.status_code == 200, deleted.text
    wait_for(lambda: not folder.exists(), "the deleted volume's folder removed")
    http.close()
