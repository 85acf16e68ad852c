"""Fetch clusters from the Together API and turn them into plain snapshots (the shell of ``status``).

A snapshot holds what ``together_clusters.drift.capacity`` and ``together_clusters.drift.timeline`` need and nothing secret: the kube
config never leaves this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from together_clusters.provider.client import TogetherClient
from together_clusters.provider.lifecycle import get_or_none
from together_clusters.provider.mapping import live_outputs, marked_compute_class
from together_clusters.provider.models import Cluster, GPUWorkerNode


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


def _node(node: GPUWorkerNode) -> dict[str, Any]:
    appeared = min((t.transition_time for t in node.phase_transitions if t.transition_time), default=None)
    return {
        "node_id": node.node_id,
        "compute_class": marked_compute_class(node),
        "num_gpus": node.num_gpus,
        "appeared_at": _iso(appeared),
        "deleted_at": _iso(node.deleted_at),
    }


def snapshot(cluster: Cluster, observed_at: datetime | None = None) -> dict[str, Any]:
    """The plain-data view of a live cluster used by ``status``."""
    outputs = live_outputs(cluster)
    nodes = [*cluster.gpu_worker_nodes, *(cluster.deleted_gpu_worker_nodes or [])]
    return {
        "cluster_id": cluster.cluster_id,
        "cluster_name": cluster.cluster_name,
        "status": cluster.status,
        "region": cluster.region,
        "gpu_type": cluster.gpu_type,
        "num_gpus": cluster.num_gpus,
        "created_at": _iso(cluster.created_at),
        "desired_preemptible_gpus": cluster.desired_preemptible_gpus,
        "allocated_preemptible_gpus": cluster.allocated_preemptible_gpus,
        "standard_nodes": outputs["standard_nodes"],
        "preemptible_nodes": outputs["preemptible_nodes"],
        "nodes": [_node(n) for n in nodes],
        "events": [
            {"timestamp": _iso(e.timestamp), "reason": e.reason, "node_id": e.node_id, "message": e.message}
            for e in cluster.node_lifecycle_events or []
        ],
        "observed_at": _iso(observed_at),
    }


def fetch_snapshots(cluster_ids: Iterable[str], client: TogetherClient | None = None) -> dict[str, Any]:
    """``{cluster_id: snapshot or None}``; ``None`` for a cluster the API does not know (any more).

    Any other API failure (unreachable, bad key) raises: ``status`` cannot say anything then.
    """
    own = client is None
    api = client or TogetherClient()
    try:
        found: dict[str, Any] = {}
        for cluster_id in cluster_ids:
            cluster = get_or_none(api, cluster_id) if cluster_id else None
            found[cluster_id] = snapshot(cluster) if cluster is not None else None
        return found
    finally:
        if own:
            api.close()
