"""Render internal records as the API's JSON replies, as of an emulated time.

Replies are plain JSON-ready dicts shaped exactly like the official SDK's types (see
:mod:`together_clusters.emulator.shapes`): building them directly keeps a listing of many clusters cheap.
Fields the SDK does not define are added only with ``extra_fields`` (an explicit emulator option).
"""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import Any

from together_clusters.platform import COMPUTE_CLASS_LABEL, LIFECYCLE_EVENT_RETENTION_SECONDS

from . import remediations
from .catalog import GPUS_PER_NODE
from .clock import to_datetime
from .lifecycle import NODE_STATUS_BY_PHASE, READY, STATUS_BY_PHASE, visible
from .records import ClusterRecord, EventRecord, NodeRecord, RemediationRecord, Timed


@lru_cache(maxsize=1 << 16)
def _iso(t: float) -> str:
    """An emulated timestamp as the API writes it: ISO 8601 in UTC, ending in ``Z``.

    Cached: the same few timestamps (phase changes, events) appear in every reading of a cluster.
    """
    return to_datetime(t).isoformat().replace("+00:00", "Z")


def _kubeconfig(record: ClusterRecord) -> str:
    """The cluster's ``kube_config`` as the API sends it: the kubeconfig document, base64-encoded.

    The official CLI base64-decodes the field (together 3.1.1, ``lib/cli/api/clusters/get_credentials.py``).
    """
    return base64.b64encode(_kubeconfig_document(record).encode()).decode()


def _kubeconfig_document(record: ClusterRecord) -> str:
    """A kubeconfig for the cluster: its twin's API server, else a server name that never resolves."""
    if record.kube_api is not None:
        return record.kube_api.kubeconfig(record.cluster_name, record.kube_token)
    name = record.cluster_name
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        f"- name: {name}\n"
        "  cluster:\n"
        f"    server: https://{record.cluster_id}.k8s.emulator.invalid\n"
        "    insecure-skip-tls-verify: true\n"
        "users:\n"
        f"- name: {name}-admin\n"
        "  user:\n"
        f"    token: {record.kube_token}\n"
        "contexts:\n"
        f"- name: {name}\n"
        "  context:\n"
        f"    cluster: {name}\n"
        f"    user: {name}-admin\n"
        f"current-context: {name}\n"
    )


def _transitions(seen: list[Timed]) -> list[dict[str, Any]]:
    return [{"phase": t.phase, "transition_time": _iso(t.at)} for t in seen]


def _node_status(node: NodeRecord, seen: list[Timed]) -> str:
    if node.deleted_at is not None:
        return "Deleted"
    if node.cordoned_at is not None:
        return "Cordoned"
    return NODE_STATUS_BY_PHASE.get(seen[-1].phase, "Pending") if seen else "Pending"


def remediation(rem: RemediationRecord) -> dict[str, Any]:
    """A remediation as ``GET .../instances/{instance_id}/remediations/{id}`` shows it (fields never set are
    left out, as the SDK's optional fields allow)."""
    body: dict[str, Any] = {
        "id": rem.remediation_id,
        "cluster_id": rem.cluster_id,
        "instance_id": rem.instance_id,
        "mode": rem.mode,
        "state": rem.state,
        "trigger": rem.trigger,
        "create_time": _iso(rem.created_at),
        "update_time": _iso(rem.updated_at),
        "instance_name": rem.node_id,
    }
    for field, value in (
        ("reason", rem.reason),
        ("requested_by", rem.requested_by),
        ("reviewed_by", rem.reviewed_by),
        ("review_comment", rem.review_comment),
        ("error_message", rem.error_message),
        ("passive_health_check_event_id", rem.passive_health_check_event_id),
    ):
        if value is not None:
            body[field] = value
    for field, at in (
        ("review_time", rem.review_time),
        ("start_time", rem.start_time),
        ("end_time", rem.end_time),
    ):
        if at is not None:
            body[field] = _iso(at)
    if rem.linked_alerts:
        body["linked_alerts"] = [_alert(a) for a in rem.linked_alerts]
    return body


def _alert(alert: dict[str, Any]) -> dict[str, Any]:
    shown = dict(alert)
    for field in ("started_at", "resolved_at"):
        if shown.get(field) is not None:
            shown[field] = _iso(shown[field])
    return shown


def remediation_record(rem: RemediationRecord) -> dict[str, Any]:
    """A remediation as the admin API shows it: the API's view plus the node, every state entered with when
    (``history``), and the instance that replaced the node (a successful VM_ONLY or HOST_AWARE repair)."""
    return remediation(rem) | {
        "node_id": rem.node_id,
        "compute_class": rem.compute_class,
        "history": [{"state": t.phase, "at": _iso(t.at)} for t in rem.history],
        "replacement_instance_id": rem.replacement_instance_id,
        "replacement_node_id": rem.replacement_node_id,
    }


def _gpu_worker_node(
    node: NodeRecord, now: float, extra_fields: bool, latest: RemediationRecord | None = None
) -> dict[str, Any]:
    seen = visible(node.schedule, now)
    # A repair that deletes the VM marks it for deletion while it runs, as a preemption does.
    going = latest is not None and latest.state == "RUNNING" and latest.mode in remediations.REMOVING_MODES
    body: dict[str, Any] = {
        "host_name": node.node_id,
        "memory_gib": 2048.0,
        "networks": ["10.64.0.0/16"],
        "node_id": node.node_id,
        "num_cpu_cores": 224,
        "num_gpus": GPUS_PER_NODE,
        "phase_transitions": _transitions(seen),
        "status": _node_status(node, seen),
        "auto_remediation_enabled": node.auto_remediation_enabled,
        "ephemeral_storage": "1Ti",
        "ib_hca_count": 8,
        "ib_hca_type": "ConnectX-7",
        "instance_id": node.instance_id,
        "marked_for_deletion": node.cordoned_at is not None or going,
        "nvswitch_count": 4,
        "nvswitch_type": "NVSwitch-4",
    }
    if node.deleted_at is not None:
        body["deleted_at"] = _iso(node.deleted_at)
    if latest is not None:
        body["latest_remediation"] = remediation(latest)
    if extra_fields:
        body["compute_class"] = node.compute_class
        body["labels"] = {COMPUTE_CLASS_LABEL: node.compute_class}
    return body


def lifecycle_events(events: list[EventRecord], now: float) -> list[dict[str, Any]]:
    """``node_lifecycle_events`` as the platform documents them: the events of the last 72 hours that have
    happened by ``now``, the latest one per node and reason, oldest first."""
    latest: dict[tuple[str, str], EventRecord] = {}
    for event in sorted(events, key=lambda e: e.at):
        if now - LIFECYCLE_EVENT_RETENTION_SECONDS <= event.at <= now:
            latest.pop((event.node_id, event.reason), None)  # re-inserted last: ordered by its new time
            latest[(event.node_id, event.reason)] = event
    return [
        {"message": e.message, "node_id": e.node_id, "reason": e.reason, "timestamp": _iso(e.at)}
        for e in latest.values()
    ]


def _control_plane_nodes(record: ClusterRecord, now: float) -> list[dict[str, Any]]:
    node = record.control_plane
    if node is None or node.appears_at > now:
        return []
    seen = visible(node.schedule, now)
    return [
        {
            "host_name": node.node_id,
            "memory_gib": 64.0,
            "network": "10.0.0.0/24",
            "node_id": node.node_id,
            "num_cpu_cores": 16,
            "phase_transitions": _transitions(seen),
            "status": _node_status(node, seen),
        }
    ]


def cluster(
    record: ClusterRecord,
    now: float,
    extra_fields: bool = False,
    volumes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The cluster as ``GET /v1/compute/clusters/{id}`` shows it at emulated time ``now``, as JSON.

    ``extra_fields`` adds what the SDK does not define: each GPU node's ``compute_class`` and ``labels``, and
    an autoscaling cluster's ``auto_scale`` and ``auto_scale_max_gpus``.
    ``volumes``: the shared volumes bound to it, as the storage API shows them (the platform keeps them).
    """
    # The first phase starts at creation, so it is always visible.
    phases = visible(record.schedule, now)
    if not record.kube_serving:
        # Ready means usable: not before the cluster's Kubernetes serves (the twin's control plane starts in
        # real seconds, which a fast clock can outrun).
        phases = [t for t in phases if t.phase != READY]
    phase = phases[-1].phase
    ready_at = next((t.at for t in phases if t.phase == READY), None)
    # The control plane is up once provisioning has moved on to the data plane.
    data_plane_reached = any(t.phase == "CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES" for t in phases)
    add_ons = [a for a in record.add_ons if _enabled(a.get("config"))]
    latest = remediations.latest_by_instance(record)
    body: dict[str, Any] = {
        "add_ons": add_ons,
        "allocated_preemptible_gpus": record.allocated_preemptible_gpus,
        "billing_type": record.billing_type,
        "cluster_id": record.cluster_id,
        "cluster_name": record.cluster_name,
        "cluster_type": record.cluster_type,
        "control_plane_nodes": _control_plane_nodes(record, now),
        "cuda_version": record.driver["cuda_version"],
        "desired_preemptible_gpus": record.desired_preemptible_gpus,
        "gpu_type": record.gpu_type,
        "gpu_worker_nodes": [
            _gpu_worker_node(n, now, extra_fields, latest.get(n.instance_id))
            for n in record.nodes
            if n.appears_at <= now
        ],
        "kube_config": _kubeconfig(record),
        "num_capacity_pool_gpus": record.num_capacity_pool_gpus,
        "num_cpu_workers": 0,
        "num_gpus": record.num_gpus,
        "num_reserved_gpus": record.num_reserved_gpus,
        "nvidia_driver_version": record.driver["nvidia_driver_version"],
        "phase_transitions": _transitions(phases),
        "project_id": record.project_id,
        "region": record.region,
        "status": STATUS_BY_PHASE[phase],
        "volumes": record.volumes if volumes is None else volumes,
        "control_plane_ready": data_plane_reached and not record.deleting,
        "created_at": _iso(record.created_at),
        "deleted_gpu_worker_nodes": [
            _gpu_worker_node(n, now, extra_fields, latest.get(n.instance_id)) for n in record.deleted_nodes
        ],
        "node_lifecycle_events": lifecycle_events(record.events, now),
        "nvidia_driver_version_id": record.driver["id"],
        "os_image": record.driver["os"],
    }
    if ready_at is not None:
        body["first_ready_at"] = _iso(ready_at)
    if extra_fields and record.auto_scale:
        # Sent at create, never reported by the real API (see emulator/autoscaling.py).
        body["auto_scale"] = True
        body["auto_scale_max_gpus"] = record.auto_scale_max_gpus
    body.update(record.echoed)
    return body


def _enabled(config: dict[str, Any] | None) -> bool:
    """An add-on is shown when any part of its config is enabled, as the real service does."""
    if not config:
        return False
    return any(isinstance(part, dict) and part.get("enabled") for part in config.values())
