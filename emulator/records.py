"""The platform's internal records: what the emulator stores, before rendering to the API shape.

Times are emulated seconds since the Unix epoch. Phase schedules may hold entries in the future:
a record is rendered as of a given time, so what is visible follows the clock without a worker thread.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from together_clusters.platform import ComputeClass

from .catalog import GPUS_PER_NODE
from .faults import ProvisioningOutcome
from .kubernetes.kubeconfig import KubeApi
from .shapes import BillingType, ClusterType, GpuType, RemediationMode, RemediationState, RemediationTrigger


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
    # Whether the platform remediates this instance without asking: its health checks' automated
    # remediations start PENDING instead of PENDING_APPROVAL (see emulator/remediations.py).
    auto_remediation_enabled: bool = False
    # Added by autoscaling (see :mod:`together_clusters.emulator.autoscaling`): only such nodes are removed when
    # idle. ``idle_since``: since when it has run no pod (None: it runs one, or was never seen idle).
    autoscaled: bool = False
    idle_since: float | None = None

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


class RemediationRecord(BaseModel):
    """A node remediation of one instance (see :mod:`together_clusters.emulator.remediations`).

    ``history`` is every state entered, with when: the record a Kubernetes twin (or a test) reads to learn
    that remediation X of instance Y entered RUNNING or finished. ``next_at`` is when the platform moves it
    on by itself (None: it waits for a user, or it is over).
    """

    remediation_id: str
    seq: int
    cluster_id: str
    instance_id: str
    node_id: str
    compute_class: ComputeClass
    mode: RemediationMode
    trigger: RemediationTrigger
    state: RemediationState
    created_at: float
    updated_at: float
    history: list[Timed]
    next_at: float | None = None
    # How it ends once it runs: "fail" is set from the admin API (a repair that does not work), perhaps with
    # the error_message it will then report.
    outcome: Literal["succeed", "fail"] = "succeed"
    failure: str | None = None
    reason: str | None = None
    requested_by: str | None = None
    reviewed_by: str | None = None
    review_comment: str | None = None
    review_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    error_message: str | None = None
    passive_health_check_event_id: str | None = None
    # Linked passive health check alerts, as the API shows them but with times as epoch seconds.
    linked_alerts: list[dict[str, Any]] = Field(default_factory=list)
    # The instance that took this one's place (VM_ONLY and HOST_AWARE, once SUCCEEDED).
    replacement_instance_id: str | None = None
    replacement_node_id: str | None = None


class VolumeRecord(BaseModel):
    """A shared volume: standalone, or bound to the cluster ``cluster_id``."""

    volume_id: str
    owner: str
    project_id: str
    volume_name: str
    region: str
    size_tib: int
    lifecycle_independent: bool
    created_at: float
    # The cluster it is attached to (None: attached to none, "available").
    cluster_id: str | None = None


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
    # Unused since volumes are the platform's own records (see emulator/storage.py); read from old state files.
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
    # Every remediation of the cluster's instances, oldest first; ``remediation_seq`` numbers them.
    remediations: list[RemediationRecord] = Field(default_factory=list)
    remediation_seq: int = 0
    # Autoscaling as created (``auto_scale``, ``auto_scale_max_gpus``; neither can be updated): num_gpus is the
    # floor, the standard GPUs grow up to the ceiling under demand (see emulator/autoscaling.py).
    auto_scale: bool = False
    auto_scale_max_gpus: int | None = None
    # The demand last reported (by the twin, or the admin API): GPUs of pods waiting for lack of GPUs, and
    # the nodes that run a pod. ``scale_at``: when autoscaling looks at the cluster next (None: no need).
    pending_gpus: int = 0
    busy_node_ids: list[str] = Field(default_factory=list)
    scale_at: float | None = None

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
