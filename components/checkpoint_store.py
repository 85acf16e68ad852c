"""CheckpointStore: where workloads keep checkpoints (a PVC on the shared volume, or an S3 bucket).

Checkpoints are data a user owns: the claim is kept on ``pulumi destroy`` (and on a replacement of the
claim) unless the code passes ``allow_data_loss=True``. On Together's Kubernetes clusters a shared volume
appears as a static PersistentVolume named after the volume (Together's docs, "Cluster storage"), so
``volume_name=`` binds the claim to it: the workloads of a cluster replaced for another GPU type, given the
same lifecycle-independent volume, see the same files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi

from . import manifests
from ._shell import ManifestComponent, metadata_field
from .args import CheckpointStorage, CheckpointStoreArgs, SharedVolume

CLAIM_TYPE = "kubernetes:core/v1:PersistentVolumeClaim"


def bound_to_volume(objects: Sequence[dict[str, Any]], volume_name: str | None) -> list[dict[str, Any]]:
    """The rendered objects with every claim bound to the static PersistentVolume ``volume_name``.

    ``storageClassName: ""`` keeps a default StorageClass from provisioning a new, empty volume instead.
    """
    if volume_name is None:
        return [dict(o) for o in objects]
    bound = []
    for obj in objects:
        obj = dict(obj)
        if obj.get("kind") == "PersistentVolumeClaim":
            obj["spec"] = {**obj.get("spec", {}), "volumeName": volume_name, "storageClassName": ""}
        bound.append(obj)
    return bound


def keep_claims(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
    """A transformation retaining the component's claims on delete: Pulumi forgets them, Kubernetes keeps
    them and the checkpoints on them."""
    if args.type_ != CLAIM_TYPE:
        return None
    kept = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(retain_on_delete=True))
    return pulumi.ResourceTransformationResult(args.props, kept)


class CheckpointStore(ManifestComponent):
    """Creates the PersistentVolumeClaim for a :class:`SharedVolume` (nothing for an S3 bucket).

    Pass :attr:`storage` as the ``checkpoint`` argument of a workload, with ``depends_on`` this store.
    ``volume_name``: the name of a Together shared volume (a ``Volume`` resource's ``volume_name``) the
    claim binds to. The claim is retained on destroy unless ``allow_data_loss=True``.
    """

    storage: CheckpointStorage
    claim_name: pulumi.Output[str | None]

    def __init__(
        self,
        name: str,
        args: CheckpointStoreArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        volume_name: str | None = None,
        allow_data_loss: bool = False,
    ) -> None:
        keep = pulumi.ResourceOptions(transformations=[] if allow_data_loss else [keep_claims])
        super().__init__(
            "CheckpointStore",
            name,
            args,
            lambda plain: bound_to_volume(manifests.checkpoint_store(plain), volume_name),
            pulumi.ResourceOptions.merge(keep, opts),
        )
        self.storage = args.storage
        if "PersistentVolumeClaim" in {key.split("/", 1)[0] for key in self.resources}:
            self.claim_name = metadata_field(self.child("PersistentVolumeClaim"), "name")
            if not allow_data_loss:
                pulumi.log.info(
                    f"CheckpointStore {name}: its claim is kept on destroy (retained, with its checkpoints); "
                    "pass allow_data_loss=True to delete it with the stack.",
                    resource=self,
                )
        else:
            claim = args.storage.claim_name if isinstance(args.storage, SharedVolume) else None
            self.claim_name = pulumi.Output.from_input(claim)
        self.finish({"claim_name": self.claim_name})
