"""CheckpointStore's objects: a PersistentVolumeClaim on the shared volume, or nothing for a bucket."""

from __future__ import annotations

from ..args import (
    CheckpointStoreArgs,
    S3Bucket,
)
from .common import Manifest, labels_for, object_metadata


def checkpoint_store(args: CheckpointStoreArgs) -> list[Manifest]:
    """A PersistentVolumeClaim on the shared volume, or nothing for a bucket (its Secret is the user's)."""
    storage = args.storage
    if isinstance(storage, S3Bucket) or not storage.create:
        return []
    spec: Manifest = {
        "accessModes": [storage.access_mode],
        "resources": {"requests": {"storage": storage.size}},
    }
    if storage.storage_class:
        spec["storageClassName"] = storage.storage_class
    labels = labels_for(storage.claim_name, "checkpoints", args.labels)
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": object_metadata(storage.claim_name, args.namespace, labels),
            "spec": spec,
        }
    ]
