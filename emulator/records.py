"""The platform's internal records: what the emulator stores, before rendering to the API shape.

Times are emulated seconds since the Unix epoch. Phase schedules may hold entries in the future:
a record is rendered as of a given time, so what is visible follows the clock without a worker thread.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from together_clusters.platform import ComputeClass

from .catalog import GPUS_PER_NODE
from .faults import ProvisioningOutcome
from .kubernetes.kubeconfig import KubeApi
from .shapes import BillingType, ClusterType, GpuType


class Timed(BaseModel):
    """A phase entered at ``at``."""

    phase: str
    at: float


class NodeRecord(BaseModel):
    """A node: its phase schedule, and when it was cordoned, is due for removal, or was deleted."""

    node_id: str
    instance_id: str
    compute_class: ComputeClass
    schedule: list[Timed]
    cordoned_at: float | None = None
    remove_at: float | None = None
    deleted_at: float | None = None

    @property
    def appears_at(self) -> float:
        """When the node shows up in the cluster (its first phase)."""
        return self.schedule[0].at


class EventRecord(BaseModel):
    """A node lifecycle event (``TogetherScaledUp``, ...); ``at`` may lie ahead of the clock."""

    node_id: str
    reason: str
    message: str
    at: float


class ClusterRecord(BaseModel):
    """One cluster and everything that happened to it."""

    cluster_id: str
    seq: int
    owner: str
    project_id: str
    cluster_name: str
    region: str
    gpu_type: GpuType
    billing_type: BillingType
    cluster_type: ClusterType
    num_gpus: int
    desired_preemptible_gpus: int
    num_reserved_gpus: int
    num_capacity_pool_gpus: int
    driver: dict[str, str]
    created_at: float
    kube_token: str
    outcome: ProvisioningOutcome = "ready"
    schedule: list[Timed]
    # None once a deletion began before the control plane node appeared.
    control_plane: NodeRecord | None
    nodes: list[NodeRecord] = Field(default_factory=list)
    deleted_nodes: list[NodeRecord] = Field(default_factory=list)
    events: list[EventRecord] = Field(default_factory=list)
    add_ons: list[dict[str, Any]] = Field(default_factory=list)
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    # Optional create-time fields echoed back as given (cluster_config, oidc_config, reservation times, ...).
    echoed: dict[str, Any] = Field(default_factory=dict)
    node_seq: int = 0
    fill_at: float | None = None
    deleting_since: float | None = None
    delete_done_at: float | None = None
    # The Kubernetes twin's API server (None: the lightweight emulator, whose kubeconfig points nowhere).
    kube_api: KubeApi | None = None
    # False until the twin's control plane serves (controllers, JobSet): the cluster is not shown Ready before.
    kube_serving: bool = True

    @property
    def deleting(self) -> bool:
        """Whether a delete was requested (the cluster lingers as Deleting for a while)."""
        return self.deleting_since is not None

    def live(self, compute_class: ComputeClass) -> list[NodeRecord]:
        """The cluster's nodes of one class, including ones not yet visible and cordoned ones."""
        return [n for n in self.nodes if n.compute_class == compute_class]

    @property
    def allocated_preemptible_gpus(self) -> int:
        return GPUS_PER_NODE * len(self.live(ComputeClass.PREEMPTIBLE))
