"""Render internal records as the API's response models, as of an emulated time."""

from __future__ import annotations

from typing import Any

from together_clusters.provider.models import (
    AddOn,
    Cluster,
    ControlPlaneNode,
    GPUWorkerNode,
    NodeLifecycleEvent,
    NodePhaseTransition,
    PhaseTransition,
    Volume,
)

from .catalog import GPUS_PER_NODE
from .clock import to_datetime
from .lifecycle import NODE_STATUS_BY_PHASE, STATUS_BY_PHASE, visible
from .records import ClusterRecord, NodeRecord

COMPUTE_CLASS_LABEL = "together.ai/compute-class"


def _kubeconfig(record: ClusterRecord) -> str:
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


def _node_transitions(node: NodeRecord, now: float) -> list[NodePhaseTransition]:
    return [
        NodePhaseTransition.model_validate({"phase": t.phase, "transition_time": to_datetime(t.at)})
        for t in visible(node.schedule, now)
    ]


def _node_status(node: NodeRecord, now: float) -> str:
    if node.deleted_at is not None:
        return "Deleted"
    if node.cordoned_at is not None:
        return "Cordoned"
    seen = visible(node.schedule, now)
    return NODE_STATUS_BY_PHASE.get(seen[-1].phase, "Pending") if seen else "Pending"


def _gpu_worker_node(node: NodeRecord, now: float) -> GPUWorkerNode:
    extra: dict[str, Any] = {
        "compute_class": node.compute_class,
        "labels": {COMPUTE_CLASS_LABEL: node.compute_class},
    }
    return GPUWorkerNode(
        host_name=node.node_id,
        memory_gib=2048.0,
        networks=["10.64.0.0/16"],
        node_id=node.node_id,
        num_cpu_cores=224,
        num_gpus=GPUS_PER_NODE,
        phase_transitions=_node_transitions(node, now),
        status=_node_status(node, now),
        auto_remediation_enabled=False,
        deleted_at=to_datetime(node.deleted_at) if node.deleted_at is not None else None,
        ephemeral_storage="1Ti",
        ib_hca_count=8,
        ib_hca_type="ConnectX-7",
        instance_id=node.instance_id,
        marked_for_deletion=node.cordoned_at is not None,
        nvswitch_count=4,
        nvswitch_type="NVSwitch-4",
        **extra,
    )


def _control_plane_nodes(record: ClusterRecord, now: float) -> list[ControlPlaneNode]:
    node = record.control_plane
    if node is None or node.appears_at > now:
        return []
    return [
        ControlPlaneNode(
            host_name=node.node_id,
            memory_gib=64.0,
            network="10.0.0.0/24",
            node_id=node.node_id,
            num_cpu_cores=16,
            phase_transitions=_node_transitions(node, now),
            status=_node_status(node, now),
        )
    ]


def cluster(record: ClusterRecord, now: float) -> Cluster:
    """The cluster as ``GET /v1/compute/clusters/{id}`` shows it at emulated time ``now``."""
    # The first phase starts at creation, so it is always visible.
    phases = visible(record.schedule, now)
    phase = phases[-1].phase
    ready_at = next((t.at for t in phases if t.phase == "CLUSTER_PHASE_READY"), None)
    # The control plane is up once provisioning has moved on to the data plane.
    data_plane_reached = any(t.phase == "CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES" for t in phases)
    add_ons = [AddOn.model_validate(a) for a in record.add_ons if _enabled(a.get("config"))]
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
        "gpu_worker_nodes": [_gpu_worker_node(n, now) for n in record.nodes if n.appears_at <= now],
        "kube_config": _kubeconfig(record),
        "num_capacity_pool_gpus": record.num_capacity_pool_gpus,
        "num_cpu_workers": 0,
        "num_gpus": record.num_gpus,
        "num_reserved_gpus": record.num_reserved_gpus,
        "nvidia_driver_version": record.driver["nvidia_driver_version"],
        "phase_transitions": [
            PhaseTransition.model_validate({"phase": t.phase, "transition_time": to_datetime(t.at)})
            for t in phases
        ],
        "project_id": record.project_id,
        "region": record.region,
        "status": STATUS_BY_PHASE[phase],
        "volumes": [Volume.model_validate(v) for v in record.volumes],
        "control_plane_ready": data_plane_reached and not record.deleting,
        "created_at": to_datetime(record.created_at),
        "deleted_gpu_worker_nodes": [_gpu_worker_node(n, now) for n in record.deleted_nodes],
        "first_ready_at": to_datetime(ready_at) if ready_at is not None else None,
        "node_lifecycle_events": [
            NodeLifecycleEvent(
                node_id=e.node_id, reason=e.reason, message=e.message, timestamp=to_datetime(e.at)
            )
            for e in sorted(record.events, key=lambda e: e.at)
            if e.at <= now
        ],
        "nvidia_driver_version_id": record.driver["id"],
        "os_image": record.driver["os"],
    }
    body.update(record.echoed)
    return Cluster.model_validate(body)


def _enabled(config: dict[str, Any] | None) -> bool:
    """An add-on is shown when any part of its config is enabled, as the real service does."""
    if not config:
        return False
    return any(isinstance(part, dict) and part.get("enabled") for part in config.values())
