"""The compute API's shapes as the emulator serves and accepts them, from the official SDK's types.

Field names, enums and required fields follow ``together/types/cluster*.py`` of the ``together`` SDK
(3.1.x). These are the emulator's own models, apart from the provider's (``provider/models.py``): the
provider reads replies leniently, while the emulator must send and accept exactly what the real API does,
so the two cannot hide each other's mistakes. The tests check every reply against the SDK's own types.
Replies are rendered as plain dicts (see :mod:`together_clusters.emulator.render`); the response models
here document them in OpenAPI.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler, PrivateAttr, model_validator

from .unknown_fields import strip_unknown

GpuType = Literal[
    "H100_SXM", "H200_SXM", "RTX_6000_PCI", "L40_PCIE", "B200_SXM", "H100_SXM_INF", "B300_SXM", "GB200_SXM"
]
BillingType = Literal["RESERVED", "ON_DEMAND", "SCHEDULED_CAPACITY"]
ClusterType = Literal["KUBERNETES", "SLURM"]
LoadBalancer = Literal["NONE", "TRAEFIK", "NGINX", "ISTIO"]
ClusterStatus = Literal[
    "WaitingForControlPlaneNodes",
    "WaitingForDataPlaneNodes",
    "WaitingForSubnet",
    "WaitingForSharedVolume",
    "InstallingDrivers",
    "RunningAcceptanceTests",
    "Paused",
    "OnDemandComputePaused",
    "Ready",
    "Degraded",
    "Deleting",
]
ClusterPhase = Literal[
    "CLUSTER_PHASE_QUEUED",
    "CLUSTER_PHASE_SCHEDULED",
    "CLUSTER_PHASE_WAITING_FOR_CONTROL_PLANE_NODES",
    "CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES",
    "CLUSTER_PHASE_WAITING_FOR_SUBNET",
    "CLUSTER_PHASE_WAITING_FOR_SHARED_VOLUME",
    "CLUSTER_PHASE_WAITING_FOR_AUTO_SCALER",
    "CLUSTER_PHASE_INSTALLING_DRIVERS",
    "CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS",
    "CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED",
    "CLUSTER_PHASE_RUNNING_NCCL_TESTS",
    "CLUSTER_PHASE_NCCL_TESTS_FAILED",
    "CLUSTER_PHASE_READY",
    "CLUSTER_PHASE_PAUSED",
    "CLUSTER_PHASE_ON_DEMAND_COMPUTE_PAUSED",
    "CLUSTER_PHASE_DEGRADED",
    "CLUSTER_PHASE_DELETING",
]
# ``ClusterStorage.status`` (together.types.clusters.cluster_storage).
StorageStatus = Literal[
    "scheduled", "available", "bound", "provisioning", "deleting", "failed", "access_revoked", "unknown"
]
DcgmDiagLevel = Literal[
    "DCGM_DIAG_LEVEL_SHORT", "DCGM_DIAG_LEVEL_MEDIUM", "DCGM_DIAG_LEVEL_LONG", "DCGM_DIAG_LEVEL_EXTENDED"
]
NodePhase = Literal[
    "NODE_PHASE_PENDING",
    "NODE_PHASE_SCHEDULING",
    "NODE_PHASE_BOOTING",
    "NODE_PHASE_BOOTSTRAPPING",
    "NODE_PHASE_RUNNING",
    "NODE_PHASE_SUCCEEDED",
    "NODE_PHASE_FAILED",
    "NODE_PHASE_PAUSED",
]

# The remediation API's enums (together.types.clusters.remediation).
RemediationMode = Literal[
    "REMEDIATION_MODE_VM_ONLY",
    "REMEDIATION_MODE_HOST_AWARE",
    "REMEDIATION_MODE_EVICT_WITHOUT_REPLACEMENT",
    "REMEDIATION_MODE_REBOOT_VM",
    "REMEDIATION_MODE_HOST_POWER_CYCLE",
]
RemediationState = Literal[
    "PENDING_APPROVAL",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "AUTO_RESOLVED",
    "QUARANTINING",
    "QUARANTINED",
]
RemediationTrigger = Literal["REMEDIATION_TRIGGER_MANUAL", "REMEDIATION_TRIGGER_AUTOMATED"]
PhcSeverity = Literal["PHC_SEVERITY_INFO", "PHC_SEVERITY_WARNING", "PHC_SEVERITY_CRITICAL"]


class _Response(BaseModel):
    """Base of what the emulator serves: exactly the SDK's fields (extras are an explicit option)."""

    model_config = ConfigDict(extra="forbid")


class _Request(BaseModel):
    """Base of what the emulator accepts: a field the API does not define is ignored, as the real API's
    gateway ignores it, and named in :attr:`ignored_fields`; the fields it defines are checked strictly.

    The unknown fields are taken out before validation (see :mod:`together_clusters.emulator.unknown_fields`),
    so ``extra="forbid"`` still guards every model below the body.
    """

    model_config = ConfigDict(extra="forbid")
    _ignored_fields: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _ignore_unknown_fields(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        ignored: list[str] = []
        if isinstance(data, dict):
            data, ignored = strip_unknown(cls, data)
        request = handler(data)
        if ignored:
            request._ignored_fields = ignored
        return request

    @property
    def ignored_fields(self) -> list[str]:
        """The dotted paths of the fields sent that the API does not define, in the order sent."""
        return list(self._ignored_fields)


# --- add-ons and cluster configuration (shared by requests and responses) -----------------------


class EnabledFlag(_Response):
    enabled: bool | None = None


class AddOnConfig(_Response):
    """Configuration for a cluster add-on."""

    dashboard: EnabledFlag | None = None
    headlamp: EnabledFlag | None = None
    ingress: EnabledFlag | None = None
    slurm_web: EnabledFlag | None = None


class AddOnState(_Response):
    dashboard: dict[str, Any] | None = None
    headlamp: dict[str, Any] | None = None
    ingress: dict[str, Any] | None = None
    slurm_web: dict[str, Any] | None = None


class AddOn(_Response):
    """An add-on as the server reports it."""

    add_on_type: str
    config: AddOnConfig
    name: str
    state: AddOnState


class SlurmStartupScripts(_Response):
    controller_epilog: str | None = None
    controller_prolog: str | None = None
    extra_slurm_conf: str | None = None
    login_init_script: str | None = None
    nodeset_init_script: str | None = None
    worker_epilog: str | None = None
    worker_prolog: str | None = None


class ClusterConfig(_Response):
    load_balancer: LoadBalancer
    gpu_operator_version: str | None = None
    ingress: EnabledFlag | None = None
    jumphost_enabled: bool | None = None
    kubernetes_dashboard_enabled: bool | None = None
    network_operator_version: str | None = None
    observability: EnabledFlag | None = None
    slurm_startup_scripts: SlurmStartupScripts | None = None
    ssh_ca_enabled: bool | None = None


class OidcConfig(_Response):
    client_id: str
    group_claim: str
    group_prefix: str
    issuer_url: str
    username_claim: str
    username_prefix: str
    ca_cert: str | None = None


# --- nodes, phases and events ------------------------------------------------------------------


class NodePhaseTransition(_Response):
    phase: NodePhase
    transition_time: datetime


class PhaseTransition(_Response):
    phase: ClusterPhase
    transition_time: datetime


class ControlPlaneNode(_Response):
    host_name: str
    memory_gib: float
    network: str
    node_id: str
    num_cpu_cores: int
    phase_transitions: list[NodePhaseTransition]
    status: str
    public_ipv4: str | None = None


# --- remediations (together.types.clusters.remediation) -------------------------------------------


class LinkedAlertAnnotationSlurmNodeUnavailable(_Response):
    reason: str


class LinkedAlertAnnotationXidEvent(_Response):
    count: int
    mnemonic: str
    xid_code: str


class LinkedAlertAnnotationXid(_Response):
    events: list[LinkedAlertAnnotationXidEvent]


class LinkedAlertAnnotation(_Response):
    description: str
    summary_line: str
    title: str
    slurm_node_unavailable: LinkedAlertAnnotationSlurmNodeUnavailable | None = None
    xid: LinkedAlertAnnotationXid | None = None


class LinkedAlert(_Response):
    """A passive health check alert linked to a remediation."""

    alert_name: str
    annotation: LinkedAlertAnnotation
    annotations: dict[str, str]
    cluster_id: str
    passive_health_check_alert_id: str
    severity: PhcSeverity
    started_at: datetime
    target_vm: str
    instance_id: str | None = None
    node_remediation_intent_id: str | None = None
    resolved_at: datetime | None = None


class Remediation(_Response):
    """A node remediation request for an instance (``.../instances/{id}/remediations/{id}``)."""

    id: str
    cluster_id: str
    instance_id: str
    mode: RemediationMode
    state: RemediationState
    trigger: RemediationTrigger
    active_health_check_run_id: str | None = None
    create_time: datetime | None = None
    end_time: datetime | None = None
    error_message: str | None = None
    instance_name: str | None = None
    linked_alerts: list[LinkedAlert] | None = None
    passive_health_check_event_id: str | None = None
    reason: str | None = None
    requested_by: str | None = None
    review_comment: str | None = None
    review_time: datetime | None = None
    reviewed_by: str | None = None
    start_time: datetime | None = None
    update_time: datetime | None = None


class RemediationList(_Response):
    """``GET .../instances/{id}/remediations``: a page, and the token of the next (``""``: none)."""

    has_next: bool
    next_page_token: str
    remediations: list[Remediation]


class GPUWorkerNode(_Response):
    """A GPU worker node. The same shape is used for ``deleted_gpu_worker_nodes``."""

    host_name: str
    memory_gib: float
    networks: list[str]
    node_id: str
    num_cpu_cores: int
    num_gpus: int
    phase_transitions: list[NodePhaseTransition]
    status: str
    auto_remediation_enabled: bool | None = None
    deleted_at: datetime | None = None
    ephemeral_storage: str | None = None
    ib_hca_count: int | None = None
    ib_hca_type: str | None = None
    instance_id: str | None = None
    latest_remediation: Remediation | None = None
    marked_for_deletion: bool | None = None
    nvswitch_count: int | None = None
    nvswitch_type: str | None = None
    public_ipv4: str | None = None
    slurm_worker_hostname: str | None = None


class NodeLifecycleEvent(_Response):
    """A node lifecycle event: ``TogetherScaledUp``, ``TogetherScaledDown`` or ``TogetherPreempted``."""

    message: str
    node_id: str
    reason: str
    timestamp: datetime


class Volume(_Response):
    size_tib: int
    status: str
    volume_id: str
    volume_name: str


# --- the cluster -------------------------------------------------------------------------------


class Cluster(_Response):
    """A GPU cluster as ``GET /v1/compute/clusters/{id}`` returns it."""

    add_ons: list[AddOn]
    allocated_preemptible_gpus: int
    billing_type: BillingType
    cluster_id: str
    cluster_name: str
    cluster_type: ClusterType
    control_plane_nodes: list[ControlPlaneNode]
    cuda_version: str
    desired_preemptible_gpus: int
    gpu_type: GpuType
    gpu_worker_nodes: list[GPUWorkerNode]
    kube_config: str = Field(repr=False)
    num_capacity_pool_gpus: int
    num_cpu_workers: int
    num_gpus: int
    num_reserved_gpus: int
    nvidia_driver_version: str
    phase_transitions: list[PhaseTransition]
    project_id: str
    region: str
    status: ClusterStatus
    volumes: list[Volume]
    capacity_pool_id: str | None = None
    cluster_config: ClusterConfig | None = None
    control_plane_ready: bool | None = None
    created_at: datetime | None = None
    deleted_gpu_worker_nodes: list[GPUWorkerNode] | None = None
    duration_hours: int | None = None
    first_ready_at: datetime | None = None
    install_traefik: bool | None = None
    is_in_substrate: bool | None = None
    machine_cluster_id: str | None = None
    node_lifecycle_events: list[NodeLifecycleEvent] | None = None
    nvidia_driver_version_id: str | None = None
    oidc_config: OidcConfig | None = None
    os_image: str | None = None
    reservation_end_time: datetime | None = None
    reservation_start_time: datetime | None = None
    slurm_shm_size_gib: int | None = None
    ums_org_id: str | None = None
    ums_project_id: str | None = None


class ClusterStorage(_Response):
    """A shared volume as ``/v1/compute/clusters/storage/volumes`` returns it (``together.types.clusters``)."""

    size_tib: int
    status: StorageStatus
    volume_id: str
    volume_name: str


class StorageList(_Response):
    volumes: list[ClusterStorage]


class StorageDeleteResponse(_Response):
    success: bool


class ClusterList(_Response):
    clusters: list[Cluster]


class ClusterDeleteResponse(_Response):
    cluster_id: str


class RegionDriverVersion(_Response):
    """An NVIDIA driver / CUDA pair offered in a region; ``id`` is the ``nvidia_version_id``."""

    id: str
    cuda_version: str
    nvidia_driver_version: str
    os: str


class Region(_Response):
    driver_versions: list[RegionDriverVersion]
    name: str
    supported_instance_types: list[str]


class RegionList(_Response):
    regions: list[Region]


# --- requests ----------------------------------------------------------------------------------


class AcceptanceTestsParams(_Request):
    dcgm_diag_level: DcgmDiagLevel | None = None
    dcgm_diag_skipped: bool | None = None
    enabled: bool | None = None
    gpu_burn_duration: int | None = None
    gpu_burn_skipped: bool | None = None
    nccl_multi_node_skipped: bool | None = None
    nccl_single_node_skipped: bool | None = None
    storage_skipped: bool | None = None


class AddOnSpec(_Request):
    """An add-on to enable at create time."""

    add_on_type: str
    name: str
    config: AddOnConfig | None = None


class AddOnUpdate(_Request):
    """New config for an existing add-on, found by name."""

    name: str
    config: AddOnConfig | None = None


class SharedVolumeSpec(_Request):
    """Inline configuration of a shared volume created with the cluster."""

    region: str
    size_tib: int
    volume_name: str
    instance_cluster_id: str | None = None
    is_lifecycle_independent: bool | None = None
    project_id: str | None = None


class ClusterCreateRequest(_Request):
    """Body of ``POST /v1/compute/clusters``.

    Either ``nvidia_version_id`` or the legacy pair ``cuda_version`` + ``nvidia_driver_version``
    selects the driver; the server resolves what is left out.
    """

    billing_type: BillingType
    cluster_name: str
    gpu_type: GpuType
    num_gpus: int
    region: str
    nvidia_version_id: str | None = None
    cuda_version: str | None = None
    nvidia_driver_version: str | None = None
    acceptance_tests_params: AcceptanceTestsParams | None = None
    add_ons: list[AddOnSpec] | None = None
    auto_scale: bool | None = None
    auto_scale_max_gpus: int | None = None
    capacity_pool_id: str | None = None
    cluster_config: ClusterConfig | None = None
    cluster_type: ClusterType | None = None
    duration_days: int | None = None
    install_traefik: bool | None = None
    num_capacity_pool_gpus: int | None = None
    num_preemptible_gpus: int | None = None
    num_reserved_gpus: int | None = None
    oidc_config: OidcConfig | None = None
    project_id: str | None = None
    reservation_end_time: datetime | None = None
    reservation_start_time: datetime | None = None
    shared_volume: SharedVolumeSpec | None = None
    slurm_image: str | None = None
    slurm_shm_size_gib: int | None = None
    volume_id: str | None = None


class ClusterUpdateRequest(_Request):
    """Body of ``PUT /v1/compute/clusters/{id}``: fields left out keep their current value."""

    add_ons: list[AddOnUpdate] | None = None
    cluster_config: ClusterConfig | None = None
    cluster_type: ClusterType | None = None
    num_capacity_pool_gpus: int | None = None
    num_gpus: int | None = None
    num_preemptible_gpus: int | None = None
    num_reserved_gpus: int | None = None
    reservation_end_time: datetime | None = None


class StorageCreateRequest(_Request):
    """Body of ``POST /v1/compute/clusters/storage/volumes`` (``StorageCreateParams``)."""

    region: str
    size_tib: int
    volume_name: str
    instance_cluster_id: str | None = None
    is_lifecycle_independent: bool | None = None
    project_id: str | None = None


class StorageUpdateRequest(_Request):
    """Body of ``PUT /v1/compute/clusters/storage/volumes`` (``StorageUpdateParams``): a resize."""

    volume_id: str
    size_tib: int | None = None


class RemediationCreateRequest(_Request):
    """Body of ``POST .../instances/{instance_id}/remediations`` (``RemediationCreateParams``)."""

    mode: RemediationMode
    reason: str | None = None


class RemediationApproveRequest(_Request):
    """Body of ``POST .../remediations/{id}/approve``: a comment, and a mode replacing the proposed one."""

    comment: str | None = None
    mode: RemediationMode | None = None


class RemediationRejectRequest(_Request):
    """Body of ``POST .../remediations/{id}/reject``."""

    comment: str | None = None
