"""What a cluster's Kubernetes nodes should be, from the platform's records (pure).

The twin mirrors every GPU worker node that has booted (phase RUNNING) and not been removed: a Node labelled
with its compute class and GPU type, with ``nvidia.com/gpu: 8``. A node being preempted carries when and for
how long, so the twin can play the sequence (see :mod:`together_clusters.sequences.preemption`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from together_clusters.platform import (
    COMPUTE_CLASS_LABEL,
    DEFAULT_PREEMPTIBLE_TAINT,
    PREEMPTIBLE,
    is_preemption,
    kubernetes_node_name,
)

from ..catalog import GPUS_PER_NODE
from ..lifecycle import visible
from ..records import ClusterRecord, NodeRecord, VolumeRecord
from ..remediations import RemediationTransition
from .kubeconfig import KubeApi
from .kwok_config import MANAGED_NODE_ANNOTATION, MANAGED_NODE_VALUE
from .shared_volumes import VolumeView, volume_views

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
REGION_LABEL = "topology.kubernetes.io/region"
INSTANCE_ID_ANNOTATION = "together.ai/instance-id"


@dataclass(frozen=True)
class Preemption:
    """A node's reclamation: cordoned at ``at`` (epoch seconds), deleted after ``grace_seconds``."""

    at: float
    grace_seconds: float
    message: str


@dataclass(frozen=True)
class NodeView:
    """One GPU worker node as Kubernetes should show it."""

    name: str
    compute_class: str
    gpu_type: str
    region: str
    instance_id: str
    preemption: Preemption | None = None


@dataclass(frozen=True)
class ClusterView:
    """A cluster's control plane identity, the nodes it should have now and its attached shared volumes."""

    cluster_id: str
    cluster_name: str
    kube_token: str
    kube_api: KubeApi | None
    nodes: tuple[NodeView, ...]
    volumes: tuple[VolumeView, ...] = ()
    remediations: tuple[RemediationTransition, ...] = ()
    """The states its remediations entered since the last view, in order (see :mod:`.repairs`)."""
    autoscales: bool = False
    """Created with ``auto_scale``: the twin reports its pods' demand each pass (see :mod:`.demand`)."""


def node_name(node_id: str) -> str:
    """The Node name of a platform node (its id is its host name here): the platform's own rule."""
    return kubernetes_node_name(node_id)


def _booted(node: NodeRecord, now: float) -> bool:
    return any(t.phase == "NODE_PHASE_RUNNING" for t in visible(node.schedule, now))


def cluster_view(record: ClusterRecord, now: float, volumes: Iterable[VolumeRecord] = ()) -> ClusterView:
    """What the twin of ``record`` (with its attached ``volumes``) should look like at ``now``."""
    nodes = []
    for node in record.nodes:
        if not _booted(node, now):
            continue
        preemption = None
        if node.cordoned_at is not None and node.remove_at is not None:
            message = next(
                (
                    e.message
                    for e in record.events
                    if e.node_id == node.node_id and is_preemption(e.reason) and e.at <= now
                ),
                f"Node {node.node_id} is being preempted",
            )
            preemption = Preemption(
                at=node.cordoned_at, grace_seconds=node.remove_at - node.cordoned_at, message=message
            )
        nodes.append(
            NodeView(
                name=node_name(node.node_id),
                compute_class=node.compute_class,
                gpu_type=record.gpu_type,
                region=record.region,
                instance_id=node.instance_id,
                preemption=preemption,
            )
        )
    return ClusterView(
        cluster_id=record.cluster_id,
        cluster_name=record.cluster_name,
        kube_token=record.kube_token,
        kube_api=record.kube_api,
        nodes=tuple(nodes),
        volumes=volume_views(volumes),
        autoscales=record.auto_scale and not record.deleting,
    )


@dataclass(frozen=True)
class NodeOptions:
    """What the platform is not known to put on nodes, as emulator options (components are tested both ways)."""

    preemptible_taint: bool = True
    """Taint preemptible nodes ``together.ai/compute-class=preemptible:NoSchedule``."""


def node_manifest(node: NodeView, options: NodeOptions) -> dict[str, Any]:
    """The Node object for ``node``, status capacity included (a kubelet registers its node that way)."""
    resources = {
        "cpu": "224",
        "memory": "2048Gi",
        "ephemeral-storage": "1Ti",
        "pods": "110",
        GPU_RESOURCE: str(GPUS_PER_NODE),
    }
    spec: dict[str, Any] = {}
    if options.preemptible_taint and node.compute_class == PREEMPTIBLE:
        taint = DEFAULT_PREEMPTIBLE_TAINT
        spec["taints"] = [{"key": taint.key, "value": taint.value, "effect": taint.effect}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {
                COMPUTE_CLASS_LABEL: node.compute_class,
                GPU_PRODUCT_LABEL: node.gpu_type,
                GPU_COUNT_LABEL: str(GPUS_PER_NODE),
                REGION_LABEL: node.region,
                "kubernetes.io/hostname": node.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
            "annotations": {
                MANAGED_NODE_ANNOTATION: MANAGED_NODE_VALUE,
                INSTANCE_ID_ANNOTATION: node.instance_id,
                "node.alpha.kubernetes.io/ttl": "0",
            },
        },
        "spec": spec,
        "status": {"capacity": resources, "allocatable": resources},
    }
