"""The clusters and the regions (``/v1/compute/clusters``, ``/v1/compute/regions``), on the API session.

A create is sent once: after an ambiguous failure (no reply, a 5xx, a 2xx we cannot read) the client lists the
clusters, retrying until the cluster with the requested name shows up or a deadline passes, and returns it.
The names held before a create come from one listing shared by the creates of a burst.
"""

from __future__ import annotations

import logging
from typing import Any

from . import errors
from .api_session import ApiSession, parse, several_made
from .models import (
    Cluster,
    ClusterCreateRequest,
    ClusterDeleteResponse,
    ClusterList,
    ClusterUpdateRequest,
    Region,
    RegionList,
)

log = logging.getLogger(__name__)

# How long the names seen in one listing count as "held before" a create: one listing serves the
# creates of a burst (a `pulumi up`), not one per create.
NAMES_SNAPSHOT_TTL_S = 30.0


class ClusterCalls(ApiSession):
    """The calls on clusters and regions."""

    def list_regions(self, *, attempts: int | None = None, timeout_s: float | None = None) -> list[Region]:
        """Regions with the GPU types and driver versions they offer."""
        options: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
        reply = self._request("GET", "/v1/compute/regions", attempts=attempts, **options)
        return parse(RegionList, reply, "GET /v1/compute/regions").regions

    def list_clusters(self, project_id: str | None = None) -> list[Cluster]:
        """Every cluster the key can see, optionally only one project's."""
        params = {"projectId": project_id} if project_id else None
        reply = self._request("GET", "/v1/compute/clusters", params=params)
        return parse(ClusterList, reply, "GET /v1/compute/clusters").clusters

    def get_cluster(self, cluster_id: str, *, attempts: int | None = None) -> Cluster:
        """One cluster; ``NotFoundError`` when it does not exist (any more).

        ``attempts=1`` is for polls, which have their own pace and deadline.
        """
        path = cluster_path(cluster_id)
        reply = parse(Cluster, self._request("GET", path, attempts=attempts), f"GET {path}")
        return _the_cluster(cluster_id, reply, f"GET {path}")

    def update_cluster(self, cluster_id: str, request: ClusterUpdateRequest) -> Cluster:
        """PUT only the fields being changed; the rest keep their current values."""
        path = cluster_path(cluster_id)
        reply = parse(Cluster, self._request("PUT", path, json=request.to_json()), f"PUT {path}")
        return _the_cluster(cluster_id, reply, f"PUT {path}")

    def delete_cluster(self, cluster_id: str) -> ClusterDeleteResponse:
        """Ask for deletion; the cluster passes through ``Deleting`` before it is gone."""
        path = cluster_path(cluster_id)
        return parse(ClusterDeleteResponse, self._request("DELETE", path), f"DELETE {path}")

    def create_cluster(
        self, request: ClusterCreateRequest, reconcile_timeout_s: float | None = None
    ) -> Cluster:
        """Create a cluster exactly once, and return it even when the reply is lost or unreadable.

        The POST is re-sent only after a 429. After an ambiguous failure the cluster is found by
        name in the listing (``reconcile``). A 409 for a name that no cluster held before this
        client's first create of it is this call's own cluster (a retry by something on the way).
        """
        name = request.cluster_name
        before = self._holders_before(name)
        made = self._create_once(request, before, reconcile_timeout_s or self.reconcile_timeout_s)
        with self._lock:
            self._names_before.setdefault(name, set()).add(str(made.cluster_id))
        return made

    def _create_once(
        self, request: ClusterCreateRequest, before: set[str], reconcile_timeout_s: float
    ) -> Cluster:
        name = request.cluster_name
        body = request.to_json()
        what = "POST /v1/compute/clusters"
        try:
            created = self._post_create(Cluster, "/v1/compute/clusters", body, what)
            if not created.cluster_id:
                raise errors.UnreadableReplyError(f"{what}: the reply has no cluster_id")
            return created
        except errors.ConflictError:
            holders = [c for c in self._list_named(name) if c.cluster_id not in before]
            if len(holders) == 1:
                log.info("create of %r: 409 for a name free before; it is this call's", name)
                return holders[0]
            raise
        except (errors.ServerError, errors.TransportError) as exc:
            log.info("create of %r: outcome unknown (%s); reconciling by name", name, exc)
            return self.reconcile(name, before, exc, reconcile_timeout_s)

    def reconcile(self, name: str, before: set[str], cause: Exception, timeout_s: float) -> Cluster:
        """The cluster named ``name`` made by a create whose reply was lost.

        The listing may lag behind the create, so it is asked again until the cluster shows up
        or ``timeout_s`` passes. Clusters that held the name before (``before``) are not it.
        """
        waited, delay = 0.0, 0.5
        while True:
            try:
                made = [c for c in self._list_named(name) if c.cluster_id not in before]
            except (errors.ServerError, errors.RateLimitError, errors.TransportError):
                made = []
            if len(made) > 1:
                raise several_made("cluster", name, cause, [c.cluster_id for c in made], "tg clusters delete")
            if made:
                return made[0]
            if waited >= timeout_s:
                raise errors.AmbiguousCreateError(
                    f"Creating cluster {name!r} had no readable reply ({cause}), and no cluster with that "
                    f"name appeared in the listing within {timeout_s:.0f}s; the listing may lag behind the "
                    "create. Check with `tg clusters list`, or run `pulumi up` again: it looks for a cluster of that name before it creates, and "
                    "if it finds one it says how to take it into the stack instead of making a second."
                )
            step = min(delay, timeout_s - waited)
            self._sleep(step)
            waited += step
            delay = min(delay * 1.5, 5.0)

    def holders_of(self, name: str) -> set[str]:
        """Ids of the clusters that held ``name`` as of this process's listing of names (shared by the
        creates of a burst), plus the clusters this client made: some may be gone or going since."""
        return self._holders_before(name)

    def _list_named(self, name: str) -> list[Cluster]:
        """The live clusters (not being deleted) that carry ``name``."""
        return [c for c in self.list_clusters() if c.cluster_name == name and c.status != "Deleting"]

    def _holders_before(self, name: str) -> set[str]:
        """Ids of clusters named ``name`` before this create: from one listing shared by the creates
        of a burst (renewed after ``NAMES_SNAPSHOT_TTL_S``), plus the clusters this client made."""
        with self._lock:
            now = self._clock()
            if self._names_seen_at is None or now - self._names_seen_at > NAMES_SNAPSHOT_TTL_S:
                snapshot: dict[str, set[str]] = {}
                for cluster in self.list_clusters():
                    if cluster.cluster_name and cluster.cluster_id:
                        snapshot.setdefault(cluster.cluster_name, set()).add(cluster.cluster_id)
                self._names_before, self._names_seen_at = snapshot, now
            return set(self._names_before.get(name, set()))


def _the_cluster(cluster_id: str, cluster: Cluster, what: str) -> Cluster:
    """``cluster`` if it is the one asked for: lenient parsing must not pass off another reply as it."""
    if cluster.cluster_id != cluster_id:
        raise errors.UnreadableReplyError(
            f"{what}: the reply is not cluster {cluster_id} (its cluster_id is {cluster.cluster_id!r})"
        )
    return cluster


def cluster_path(cluster_id: str) -> str:
    if not cluster_id or "/" in cluster_id:
        raise ValueError(f"cluster_id must be a non-empty id without '/'; got {cluster_id!r}")
    return f"/v1/compute/clusters/{cluster_id}"
