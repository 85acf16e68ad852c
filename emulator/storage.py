"""Shared volumes: created alone or with a cluster, attached to one cluster, resized, deleted.

Nothing here locks, stores or speaks HTTP; the platform does that. A volume created inline with a cluster
(``shared_volume``) or attached by ``volume_id`` is bound to that cluster; once the cluster is gone the
volume goes with it unless it is lifecycle-independent, in which case it is available again (the real
service's ``is_lifecycle_independent``: "the shared volume is not deleted when the cluster is
decommissioned"). What the real API refuses is refused here: a volume of another region, a shrink, the
delete of a volume attached to a cluster (the SDK: "if this volume is attached to a cluster, deleting will
fail").
"""

from __future__ import annotations

import uuid
from collections.abc import Container
from typing import Any

from . import catalog
from .errors import conflict, invalid, not_found
from .records import VolumeRecord
from .shapes import SharedVolumeSpec, StorageCreateRequest, StorageUpdateRequest


def view(volume: VolumeRecord) -> dict[str, Any]:
    """The volume as the storage API (and a cluster's ``volumes``) shows it."""
    return {
        "size_tib": volume.size_tib,
        "status": "bound" if volume.cluster_id is not None else "available",
        "volume_id": volume.volume_id,
        "volume_name": volume.volume_name,
    }


class Volumes:
    """Every shared volume of every owner, by id."""

    def __init__(self) -> None:
        self.records: dict[str, VolumeRecord] = {}

    def create(
        self,
        owner: str,
        default_project_id: str,
        req: StorageCreateRequest | SharedVolumeSpec,
        now: float,
        cluster_id: str | None = None,
    ) -> VolumeRecord:
        """A new volume (bound to ``cluster_id`` when created with that cluster)."""
        check_new(req)
        record = VolumeRecord(
            volume_id=f"vol-{uuid.uuid4().hex[:12]}",
            owner=owner,
            project_id=req.project_id or default_project_id,
            volume_name=req.volume_name,
            region=req.region,
            size_tib=req.size_tib,
            lifecycle_independent=bool(req.is_lifecycle_independent),
            created_at=now,
            cluster_id=cluster_id,
        )
        self.records[record.volume_id] = record
        return record

    def owned(self, owner: str, volume_id: str) -> VolumeRecord:
        """One of ``owner``'s volumes; 404 for any other."""
        record = self.records.get(volume_id)
        if record is None or record.owner != owner:
            raise not_found(f"volume {volume_id} not found", "volume_id")
        return record

    def listed(self, owner: str, project_id: str | None = None) -> list[VolumeRecord]:
        """``owner``'s volumes (of one project, when given), oldest first."""
        return sorted(
            (
                v
                for v in self.records.values()
                if v.owner == owner and (project_id is None or v.project_id == project_id)
            ),
            key=lambda v: v.created_at,
        )

    def listed_all(self) -> list[VolumeRecord]:
        """Every volume, oldest first."""
        return sorted(self.records.values(), key=lambda v: v.created_at)

    def of_cluster(self, cluster_id: str) -> list[VolumeRecord]:
        """The volumes bound to a cluster."""
        return [v for v in self.records.values() if v.cluster_id == cluster_id]

    def check_attach(self, owner: str, volume_id: str, region: str, live_clusters: Container[str]) -> None:
        """Refuse to attach a volume that is not the owner's, is in another region, or is bound elsewhere."""
        record = self.owned(owner, volume_id)
        if record.region != region:
            raise invalid(
                f"volume_id {volume_id!r} is in region {record.region!r}, not the cluster's {region!r}: "
                "a cluster can only use a volume of its own region",
                "volume_id",
            )
        if record.cluster_id is not None and record.cluster_id in live_clusters:
            raise conflict(
                f"volume_id {volume_id!r} is attached to cluster {record.cluster_id}; "
                "detach it (delete that cluster) first",
                "volume_id",
            )

    def attach(self, volume_id: str, cluster_id: str) -> None:
        """Bind a volume to a cluster (after :meth:`check_attach`)."""
        self.records[volume_id].cluster_id = cluster_id

    def resize(self, owner: str, req: StorageUpdateRequest) -> VolumeRecord:
        """Grow a volume; a shrink is refused (data would not fit)."""
        record = self.owned(owner, req.volume_id)
        if req.size_tib is not None:
            if req.size_tib < record.size_tib:
                raise invalid(
                    f"size_tib can only grow: volume {record.volume_id} has {record.size_tib} TiB; "
                    f"got {req.size_tib}",
                    "size_tib",
                )
            record.size_tib = req.size_tib
        return record

    def delete(self, owner: str, volume_id: str, live_clusters: Container[str]) -> None:
        """Delete a volume no cluster uses; one attached to a live cluster is refused (409)."""
        record = self.owned(owner, volume_id)
        if record.cluster_id is not None and record.cluster_id in live_clusters:
            raise conflict(
                f"volume {volume_id} is attached to cluster {record.cluster_id}; delete the cluster first",
                "volume_id",
            )
        del self.records[volume_id]

    def settle(self, live_clusters: Container[str]) -> bool:
        """Volumes of clusters that are gone: deleted with them, or available again when independent.

        Returns whether anything changed.
        """
        changed = False
        for record in list(self.records.values()):
            if record.cluster_id is None or record.cluster_id in live_clusters:
                continue
            changed = True
            if record.lifecycle_independent:
                record.cluster_id = None
            else:
                del self.records[record.volume_id]
        return changed

    def to_json(self) -> list[dict[str, Any]]:
        return [v.model_dump(mode="json") for v in self.records.values()]

    def load_json(self, saved: list[dict[str, Any]]) -> None:
        self.records = {r.volume_id: r for r in (VolumeRecord.model_validate(v) for v in saved)}


def check_new(req: StorageCreateRequest | SharedVolumeSpec, field: str = "") -> None:
    """Refuse a new volume the platform would refuse: an unknown region, a size below 1 TiB."""
    if req.region not in {r.name for r in catalog.regions()}:
        known = ", ".join(r.name for r in catalog.regions())
        raise invalid(f"{field}region must be one of {known}; got {req.region!r}", f"{field}region")
    if req.size_tib < 1:
        raise invalid(f"{field}size_tib must be at least 1; got {req.size_tib}", f"{field}size_tib")
    if not req.volume_name.strip():
        raise invalid(f"{field}volume_name must not be empty; got {req.volume_name!r}", f"{field}volume_name")
