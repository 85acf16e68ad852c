"""CheckpointStore: where workloads keep checkpoints (a PVC on the shared volume, or an S3 bucket)."""

from __future__ import annotations

import pulumi

from . import manifests
from ._shell import ManifestComponent, metadata_field
from .args import CheckpointStorage, CheckpointStoreArgs, SharedVolume


class CheckpointStore(ManifestComponent):
    """Creates the PersistentVolumeClaim for a :class:`SharedVolume` (nothing for an S3 bucket).

    Pass :attr:`storage` as the ``checkpoint`` argument of a workload, with ``depends_on`` this store.
    """

    storage: CheckpointStorage
    claim_name: pulumi.Output[str | None]

    def __init__(
        self, name: str, args: CheckpointStoreArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("CheckpointStore", name, args, manifests.checkpoint_store, opts)
        self.storage = args.storage
        if "PersistentVolumeClaim" in {key.split("/", 1)[0] for key in self.resources}:
            self.claim_name = metadata_field(self.child("PersistentVolumeClaim"), "name")
        else:
            claim = args.storage.claim_name if isinstance(args.storage, SharedVolume) else None
            self.claim_name = pulumi.Output.from_input(claim)
        self.finish({"claim_name": self.claim_name})
