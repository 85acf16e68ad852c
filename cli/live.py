"""Fetch clusters from the Together API and turn them into plain snapshots (the shell of ``status``, and of
the workloads part of ``drift``).

A snapshot holds what ``together_clusters.cli.capacity`` and ``together_clusters.cli.status.timeline`` need and nothing secret: the kube
config never leaves this module (the cluster's workloads are read with it here, into the snapshot's
``kubernetes`` view, by ``together_clusters.cli.kube_view``). With ``remediations``, a snapshot also holds the
cluster's node repairs as the API lists them (``remediations``; ``remediations_unread`` says why not).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from together_clusters.provider.client import TogetherClient
from together_clusters.provider.errors import APIError, NotFoundError, TransportError, WrongTargetError
from together_clusters.provider.kubeconfig import kubeconfig_text
from together_clusters.provider.lifecycle import get_or_none
from together_clusters.provider.mapping import live_outputs, marked_compute_class
from together_clusters.provider.models import Cluster, GPUWorkerNode, Remediation
from together_clusters.provider.settings import API_KEY_CONFIG, API_KEY_ENV
from together_clusters.provider.vocabulary import ACTIVE_REMEDIATION_STATES, ENDED_REMEDIATION_STATES

from . import api_settings, capacity, kube_view
from .stack_state import StateResource


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


def _node(node: GPUWorkerNode) -> dict[str, Any]:
    appeared = min((t.transition_time for t in node.phase_transitions if t.transition_time), default=None)
    return {
        "node_id": node.node_id,
        "host_name": node.host_name,
        "instance_id": node.instance_id,
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
        **_autoscaling_settings(cluster),
    }


def _autoscaling_settings(cluster: Cluster) -> dict[str, Any]:
    """``auto_scale`` and ``auto_scale_max_gpus`` where the reply has them: only an emulator with extra fields
    sends them (the real reply does not define them); the stack's inputs win (capacity.with_stack_inputs)."""
    extra = cluster.model_extra or {}
    found = {k: extra.get(k, getattr(cluster, k, None)) for k in capacity.AUTOSCALING_SETTINGS}
    return {k: v for k, v in found.items() if v is not None}


ENDED_REMEDIATIONS_READ = 20
"""How many of the newest ended remediations a snapshot holds: one page, whatever the cluster's history."""


def remediations(client: TogetherClient, cluster_id: str) -> tuple[list[dict[str, Any]], str | None]:
    """The cluster's remediations under way (every page) and its newest ended ones (one page), as JSON, or
    why they could not be read (one line): the repairs are information, they never stop ``status``."""
    try:
        active = client.list_remediations(cluster_id, "-", states=list(ACTIVE_REMEDIATION_STATES))
        ended = client.list_remediations_page(
            cluster_id, "-", states=list(ENDED_REMEDIATION_STATES), page_size=ENDED_REMEDIATIONS_READ
        ).remediations
    except (APIError, TransportError) as error:
        return [], f"the API's remediations could not be read: {' '.join(str(error).split())[:200]}"
    return [_remediation(r) for r in [*active, *ended]], None


def _remediation(remediation: Remediation) -> dict[str, Any]:
    return remediation.model_dump(
        mode="json",
        include={
            "id",
            "instance_id",
            "instance_name",
            "mode",
            "state",
            "trigger",
            "create_time",
            "review_time",
            "start_time",
            "end_time",
        },
    )


def fetch_snapshots(
    cluster_ids: Iterable[str],
    client: TogetherClient | None = None,
    *,
    workloads: bool = False,
    repairs: bool = False,
) -> dict[str, Any]:
    """``{cluster_id: snapshot or None}``; ``None`` for a cluster the API does not know (any more).
    ``workloads``: also read each cluster's Kubernetes API into the snapshot's ``kubernetes`` view;
    ``repairs``: also its remediations (see :func:`remediations`).

    Any other API failure (unreachable, bad key) raises: ``status`` cannot say anything then.
    """
    own = client is None
    api = client or TogetherClient()
    try:
        found: dict[str, Any] = {}
        for cluster_id in cluster_ids:
            cluster = get_or_none(api, cluster_id) if cluster_id else None
            found[cluster_id] = snapshot(cluster) if cluster is not None else None
            if cluster is not None and workloads:
                found[cluster_id]["kubernetes"] = kube_view.read(kubeconfig_text(cluster.kube_config))
            if cluster is not None and repairs:
                listed, unread = remediations(api, cluster_id)
                found[cluster_id].update(remediations=listed, remediations_unread=unread)
        return found
    finally:
        if own:
            api.close()


def stack_snapshots(
    resources: Sequence[StateResource],
    stack_api: api_settings.ApiSettings,
    *,
    workloads: bool = False,
    repairs: bool = False,
) -> dict[str, Any]:
    """Each of a stack's clusters read with the key and endpoint the provider would use for it."""
    by_settings: dict[api_settings.ApiSettings, list[str]] = {}
    for res in resources:
        by_settings.setdefault(api_settings.for_cluster(res, stack_api), []).append(res.id)
    by_id = {res.id: res for res in resources}
    found: dict[str, Any] = {}
    for settings, ids in by_settings.items():
        with TogetherClient(api_key=settings.api_key, base_url=settings.base_url) as client:
            refuse_another_project(client, [by_id[i] for i in ids])
            found.update(fetch_snapshots(ids, client, workloads=workloads, repairs=repairs))
    return found


def refuse_another_project(client: TogetherClient, resources: Sequence[StateResource]) -> None:
    """A key of another project than the one a cluster was created in cannot see it: the API's 404 would
    read as "deleted". Refused instead, naming both projects (the provider refuses the same)."""
    try:
        here = client.whoami().project_id
    except NotFoundError:  # an API without whoami: nothing to compare
        return
    for res in resources:
        recorded = res.outputs.get(api_settings.RECORDED_PROJECT)
        if isinstance(recorded, str) and recorded and here and recorded != here:
            raise WrongTargetError(
                f"cluster {res.id} ({res.name}) was created in project {recorded!r}, and the API key in use "
                f"belongs to project {here!r}, which cannot see it. Use a key of project {recorded!r} "
                f"(`pulumi config set --secret {API_KEY_CONFIG} <key>` or {API_KEY_ENV})."
            )
