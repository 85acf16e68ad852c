"""A cluster's shared volumes as Kubernetes sees them: one static PersistentVolume each (pure).

Together's docs ("Cluster storage") say the service gives a cluster with a shared volume a static
PersistentVolume of the volume's name, ReadWriteMany, which a PersistentVolumeClaim naming it (``volumeName``,
``storageClassName: ""``) binds to, and through which every node sees the volume's files. The twin does the
same, backed by a folder of this machine that belongs to the VOLUME, not the cluster: a cluster replaced for
another GPU type and given the same volume sees the same files. The PV's ``hostPath`` names that folder, and
the local runtime mounts a claim bound to the PV from it (:class:`~.local_pods.Layout`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..records import VolumeRecord

VOLUME_ID_LABEL = "twin.together.ai/volume-id"
"""On the twin's PersistentVolume of a shared volume: the platform's volume id (the folder's name)."""


@dataclass(frozen=True)
class VolumeView:
    """A shared volume attached to a cluster, as its PersistentVolume should show it."""

    volume_id: str
    volume_name: str
    size_tib: int


def volume_views(records: Iterable[VolumeRecord]) -> tuple[VolumeView, ...]:
    """The views of a cluster's attached volumes."""
    return tuple(VolumeView(r.volume_id, r.volume_name, r.size_tib) for r in records)


def folder_of(volumes_root: Path, volume_id: str) -> Path:
    """The host folder holding a volume's files (one per volume, whichever cluster it is attached to)."""
    return volumes_root / volume_id


def capacity(volume: VolumeView) -> str:
    """The PV's ``capacity.storage``: the volume's size."""
    return f"{volume.size_tib}Ti"


def persistent_volume(volume: VolumeView, folder: Path) -> dict[str, Any]:
    """The static PersistentVolume of ``volume``, backed by ``folder``.

    ``Retain``: deleting a claim never deletes the volume's files (the real volume outlives any claim).
    """
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume.volume_name, "labels": {VOLUME_ID_LABEL: volume.volume_id}},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "capacity": {"storage": capacity(volume)},
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "volumeMode": "Filesystem",
            "hostPath": {"path": str(folder), "type": "DirectoryOrCreate"},
        },
    }
