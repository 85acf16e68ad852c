"""Before a create: a live cluster of the same name, in the same project, that the stack does not track.

A create reaches the provider only for a resource the stack does not hold, so such a cluster is never
this resource's: most often it is the stack's own earlier attempt, made by a ``pulumi up`` that was
killed while it waited for Ready, or by a create whose reply was lost while the listing lagged. Creating
again would make a second billed cluster of the same name (an API that allows duplicate names takes
it) and leave the first running untracked. So the create is refused, whatever the API's name mode,
with the cluster's id and age and the recovery that needs no code change: the adoption config key.

``pulumi refresh --import-pending-creates <urn> <id>`` is not offered: with the engine this project pins
(v3.274.1, local backend, non-interactive) it drops the pending create of a killed ``up`` without importing
it (tests/campaign/test_engine_campaign.py tried it), which would leave the cluster untracked again.
"""

from __future__ import annotations

from datetime import UTC, datetime

from .client import Identity, TogetherClient
from .errors import NotFoundError, UntrackedClusterError
from .models import Cluster
from .settings import ADOPT_CONFIG_KEY, ADOPT_MANY_CONFIG_KEY


def refuse_untracked_namesake(client: TogetherClient, cluster_name: str, identity: Identity) -> None:
    """Raise ``UntrackedClusterError`` when a live cluster in this project already has ``cluster_name``.

    The names come from the listing the client already takes once per burst of creates; each holder
    is read again, so one deleted since (a replacement deletes first) does not count.
    """
    for cluster_id in sorted(client.holders_of(cluster_name)):
        try:
            cluster = client.get_cluster(cluster_id)
        except NotFoundError:
            continue
        if is_namesake(cluster, cluster_name, identity.project_id):
            raise UntrackedClusterError(
                untracked_message(cluster, datetime.now(UTC)),
                cluster_id=cluster_id,
                cluster_name=cluster_name,
            )


def is_namesake(cluster: Cluster, cluster_name: str, project_id: str | None) -> bool:
    """Live, named ``cluster_name``, and in ``project_id`` (when both sides say which project)."""
    same_project = not (project_id and cluster.project_id) or cluster.project_id == project_id
    return cluster.cluster_name == cluster_name and cluster.status != "Deleting" and same_project


def untracked_message(cluster: Cluster, now: datetime) -> str:
    """One line: which cluster, how old, and how to take it into the stack."""
    cluster_id = cluster.cluster_id
    age = f", created {_age(cluster.created_at, now)} ago" if cluster.created_at else ""
    return (
        f"cluster_name {cluster.cluster_name!r} is already held by cluster {cluster_id} ({cluster.status}"
        f"{age}) in this project, and this stack does not track it: most often it is this stack's own "
        "earlier attempt (a `pulumi up` killed or cut off before it recorded the create). Nothing was "
        "created. To take it into the stack, set adopt_cluster_id="
        f"'{cluster_id}' on the Cluster (`adoptClusterId: {cluster_id}` in YAML, TypeScript and Go; in the "
        f"templates and examples: `pulumi config set {ADOPT_CONFIG_KEY} {cluster_id}`, or where a stack has several "
        f"clusters `pulumi config set --path {ADOPT_MANY_CONFIG_KEY}.{cluster.cluster_name} {cluster_id}`), then "
        "`pulumi up` again. If it "
        f"is not this stack's, choose another cluster_name or delete it (`tg clusters delete {cluster_id}`)."
    )


def _age(created_at: datetime, now: datetime) -> str:
    if created_at.tzinfo is None:
        created_at = created_at.replace(tzinfo=UTC)
    seconds = max(0, int((now - created_at).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"
