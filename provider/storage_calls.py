"""The shared volumes (``/v1/compute/clusters/storage/volumes``), on the API session. A create is sent once:
after an ambiguous failure the new volume of that name is it."""

from __future__ import annotations

import logging

from . import errors
from .api_session import ApiSession, parse, several_made
from .models import (
    ClusterStorage,
    StorageCreateRequest,
    StorageDeleteResponse,
    StorageList,
    StorageUpdateRequest,
)

log = logging.getLogger(__name__)

VOLUMES_PATH = "/v1/compute/clusters/storage/volumes"


class StorageCalls(ApiSession):
    """The calls on shared volumes."""

    def list_volumes(self, project_id: str | None = None) -> list[ClusterStorage]:
        """Every shared volume the key can see, optionally only one project's."""
        params = {"projectId": project_id} if project_id else None
        reply = self._request("GET", VOLUMES_PATH, params=params)
        return parse(StorageList, reply, f"GET {VOLUMES_PATH}").volumes

    def get_volume(self, volume_id: str) -> ClusterStorage:
        """One volume; ``NotFoundError`` when it does not exist (any more)."""
        path = _volume_path(volume_id)
        reply = parse(ClusterStorage, self._request("GET", path), f"GET {path}")
        return _the_volume(volume_id, reply, f"GET {path}")

    def resize_volume(self, volume_id: str, size_tib: int) -> ClusterStorage:
        """Grow a volume to ``size_tib`` (the API refuses a shrink)."""
        body = StorageUpdateRequest(volume_id=volume_id, size_tib=size_tib).to_json()
        reply = parse(ClusterStorage, self._request("PUT", VOLUMES_PATH, json=body), f"PUT {VOLUMES_PATH}")
        return _the_volume(volume_id, reply, f"PUT {VOLUMES_PATH}")

    def delete_volume(self, volume_id: str) -> StorageDeleteResponse:
        """Delete a volume; the API refuses (409) while a cluster uses it."""
        path = _volume_path(volume_id)
        return parse(StorageDeleteResponse, self._request("DELETE", path), f"DELETE {path}")

    def create_volume(self, request: StorageCreateRequest) -> ClusterStorage:
        """Create a volume exactly once: after a reply lost on the way, the new volume of that name is it."""
        what = f"POST {VOLUMES_PATH}"
        name = request.volume_name
        before = {v.volume_id for v in self.list_volumes() if v.volume_name == name}
        try:
            created = self._post_create(ClusterStorage, VOLUMES_PATH, request.to_json(), what)
            if not created.volume_id:
                raise errors.UnreadableReplyError(f"{what}: the reply has no volume_id")
            return created
        except (errors.ServerError, errors.TransportError, errors.UnreadableReplyError) as exc:
            made = [v for v in self.list_volumes() if v.volume_name == name and v.volume_id not in before]
            if len(made) == 1:
                log.info("create of volume %r: outcome unknown (%s); found it by name", name, exc)
                return made[0]
            if len(made) > 1:
                ids = [v.volume_id for v in made]
                raise several_made("volume", name, exc, ids, "tg clusters storage delete") from exc
            raise


def _the_volume(volume_id: str, volume: ClusterStorage, what: str) -> ClusterStorage:
    """``volume`` if it is the one asked for."""
    if volume.volume_id != volume_id:
        raise errors.UnreadableReplyError(
            f"{what}: the reply is not volume {volume_id} (its volume_id is {volume.volume_id!r})"
        )
    return volume


def _volume_path(volume_id: str) -> str:
    if not volume_id or "/" in volume_id:
        raise ValueError(f"volume_id must be a non-empty id without '/'; got {volume_id!r}")
    return f"{VOLUMES_PATH}/{volume_id}"
