"""Pydantic models of Together's GPU cluster compute API (``/v1/compute``).

Field names, enums and shapes mirror the official ``together`` SDK (3.1.x),
``together/types/cluster*.py``. Response models tolerate fields the server adds
later (``extra="allow"``) so an API release never breaks a refresh; request
models forbid unknown fields so a typo fails before anything is sent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .vocabulary import BillingType, ClusterType, DcgmDiagLevel, GpuType, LoadBalancer, RemediationMode

# Phases in which provisioning has stopped for good: waiting longer will not make the cluster Ready.
FAILED_PHASES: frozenset[str] = frozenset(
    {"CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED", "CLUSTER_PHASE_NCCL_TESTS_FAILED"}
)


class _Response(BaseModel):
    """Base of everything the server sends, read as leniently as the official SDK reads it.

    Unknown fields are kept, enum-like fields are plain strings (a value added by a later API release
    is kept, not rejected), every field is optional, and ``null`` means "not reported".
    """

    model_config = ConfigDict(extra="allow", defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data


class _Request(BaseModel):
    """Base of everything we send: unknown fields are a bug on our side."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    def to_json(self) -> dict[str, Any]:
        """The wire body: unset fields are left out rather than sent as null (an update: only what changes)."""
        return self.model_dump(mode="json", exclude_none=True)


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

    add_on_type: str | None = None
    config: AddOnConfig | None = None
    name: str | None = None
    state: AddOnState | None = None


class SlurmStartupScripts(_Response):
    controller_epilog: str | None = None
    controller_prolog: str | None = None
    extra_slurm_conf: str | None = None
    login_init_script: str | None = None
    nodeset_init_script: str | None = None
    worker_epilog: str | None = None
    worker_prolog: str | None = None


class ClusterConfig(_Response):
    load_balancer: str | None = None
    gpu_operator_version: str | None = None
    ingress: EnabledFlag | None = None
    jumphost_enabled: bool | None = None
    kubernetes_dashboard_enabled: bool | None = None
    network_operator_version: str | None = None
    observability: EnabledFlag | None = None
    slurm_startup_scripts: SlurmStartupScripts | None = None
    ssh_ca_enabled: bool | None = None


class OidcConfig(_Response):
    client_id: str | None = None
    group_claim: str | None = None
    group_prefix: str | None = None
    issuer_url: str | None = None
    username_claim: str | None = None
    username_prefix: str | None = None
    ca_cert: str | None = None


# --- nodes, phases and events ------------------------------------------------------------------


def latest_phase(transitions: list[NodePhaseTransition] | list[PhaseTransition]) -> str | None:
    """The phase of the newest transition that says when it happened."""
    dated = [t for t in transitions if t.transition_time is not None and t.phase is not None]
    if not dated:
        return None
    return max(dated, key=lambda t: t.transition_time).phase  # type: ignore[arg-type,return-value]


class NodePhaseTransition(_Response):
    phase: str | None = None
    transition_time: datetime | None = None


class PhaseTransition(_Response):
    phase: str | None = None
    transition_time: datetime | None = None


class ControlPlaneNode(_Response):
    host_name: str | None = None
    memory_gib: float | None = None
    network: str | None = None
    node_id: str | None = None
    num_cpu_cores: int | None = None
    phase_transitions: list[NodePhaseTransition] = Field(default_factory=list)
    status: str | None = None
    public_ipv4: str | None = None


class LinkedAlertAnnotationXidEvent(_Response):
    count: int | None = None
    mnemonic: str | None = None
    xid_code: str | None = None


class LinkedAlertAnnotationXid(_Response):
    events: list[LinkedAlertAnnotationXidEvent] = Field(default_factory=list)


class LinkedAlertAnnotationSlurmNodeUnavailable(_Response):
    reason: str | None = None


class LinkedAlertAnnotation(_Response):
    description: str | None = None
    summary_line: str | None = None
    title: str | None = None
    slurm_node_unavailable: LinkedAlertAnnotationSlurmNodeUnavailable | None = None
    xid: LinkedAlertAnnotationXid | None = None


class LinkedAlert(_Response):
    alert_name: str | None = None
    annotation: LinkedAlertAnnotation | None = None
    annotations: dict[str, str] = Field(default_factory=dict)
    cluster_id: str | None = None
    passive_health_check_alert_id: str | None = None
    severity: str | None = None
    started_at: datetime | None = None
    target_vm: str | None = None
    instance_id: str | None = None
    node_remediation_intent_id: str | None = None
    resolved_at: datetime | None = None


class Remediation(_Response):
    """A node remediation request for an instance (the SDK's ``together.types.clusters.Remediation``).

    ``mode``, ``state`` and ``trigger`` take the values of :mod:`.vocabulary` (``RemediationMode``,
    ``RemediationState``, ``RemediationTrigger``), kept as plain strings so a later value is read, not refused.
    """

    id: str | None = None
    cluster_id: str | None = None
    instance_id: str | None = None
    mode: str | None = None
    state: str | None = None
    trigger: str | None = None
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
    """A page of ``GET .../instances/{instance_id}/remediations``; ``next_page_token`` is empty on the last."""

    has_next: bool = False
    next_page_token: str = ""
    remediations: list[Remediation] = Field(default_factory=list)


class GPUWorkerNode(_Response):
    """A GPU worker node. The same shape is used for ``deleted_gpu_worker_nodes``."""

    host_name: str | None = None
    memory_gib: float | None = None
    networks: list[str] = Field(default_factory=list)
    node_id: str | None = None
    num_cpu_cores: int | None = None
    num_gpus: int | None = None
    phase_transitions: list[NodePhaseTransition] = Field(default_factory=list)
    status: str | None = None
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

    @property
    def latest_phase(self) -> str | None:
        """The node's newest phase (``NODE_PHASE_RUNNING`` once it serves)."""
        return latest_phase(self.phase_transitions)


DeletedGPUWorkerNode = GPUWorkerNode


class NodeLifecycleEvent(_Response):
    """A node lifecycle event; its reasons: :class:`together_clusters.platform.LifecycleReason`."""

    message: str | None = None
    node_id: str | None = None
    reason: str | None = None
    timestamp: datetime | None = None


class Volume(_Response):
    size_tib: int | None = None
    status: str | None = None
    volume_id: str | None = None
    volume_name: str | None = None


# --- the cluster -------------------------------------------------------------------------------


class Cluster(_Response):
    """A GPU cluster as ``GET /v1/compute/clusters/{id}`` returns it."""

    add_ons: list[AddOn] = Field(default_factory=list)
    allocated_preemptible_gpus: int | None = None
    billing_type: str | None = None
    cluster_id: str | None = None
    cluster_name: str | None = None
    cluster_type: str | None = None
    control_plane_nodes: list[ControlPlaneNode] = Field(default_factory=list)
    cuda_version: str | None = None
    desired_preemptible_gpus: int | None = None
    gpu_type: str | None = None
    gpu_worker_nodes: list[GPUWorkerNode] = Field(default_factory=list)
    kube_config: str | None = Field(default=None, repr=False)
    num_capacity_pool_gpus: int | None = None
    num_cpu_workers: int | None = None
    num_gpus: int | None = None
    num_reserved_gpus: int | None = None
    nvidia_driver_version: str | None = None
    phase_transitions: list[PhaseTransition] = Field(default_factory=list)
    project_id: str | None = None
    region: str | None = None
    status: str | None = None
    volumes: list[Volume] = Field(default_factory=list)
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

    @property
    def latest_phase(self) -> str | None:
        """The newest cluster phase, which says more than ``status`` (queued, tests failed, ...)."""
        return latest_phase(self.phase_transitions)


class ClusterList(_Response):
    clusters: list[Cluster] = Field(default_factory=list)


class ClusterDeleteResponse(_Response):
    cluster_id: str | None = None


class RegionDriverVersion(_Response):
    """An NVIDIA driver / CUDA pair offered in a region; ``id`` is the ``nvidia_version_id``.

    The catalog is read strictly: a malformed one is unreadable, and preview checks then skip it.
    """

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


class ClusterConfigSpec(ClusterConfig):
    """Cluster configuration as we send it: the load balancer must be one the API knows."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    load_balancer: LoadBalancer  # type: ignore[assignment]


class OidcConfigSpec(_Request):
    """OIDC sign-in as we send it: every key but ``ca_cert`` is required (the SDK's create params)."""

    client_id: str
    group_claim: str
    group_prefix: str
    issuer_url: str
    username_claim: str
    username_prefix: str
    ca_cert: str | None = None


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
    cluster_config: ClusterConfigSpec | None = None
    cluster_type: ClusterType | None = None
    duration_days: int | None = None
    install_traefik: bool | None = None
    num_capacity_pool_gpus: int | None = None
    num_preemptible_gpus: int | None = None
    num_reserved_gpus: int | None = None
    oidc_config: OidcConfigSpec | None = None
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
    cluster_config: ClusterConfigSpec | None = None
    cluster_type: ClusterType | None = None
    num_capacity_pool_gpus: int | None = None
    num_gpus: int | None = None
    num_preemptible_gpus: int | None = None
    num_reserved_gpus: int | None = None
    reservation_end_time: datetime | None = None


# --- shared volumes (``/v1/compute/clusters/storage/volumes``) -----------------------------------


class ClusterStorage(_Response):
    """A shared volume as the storage API returns it (the SDK's ``ClusterStorage``)."""

    size_tib: int | None = None
    status: str | None = None
    volume_id: str | None = None
    volume_name: str | None = None


class StorageList(_Response):
    volumes: list[ClusterStorage] = Field(default_factory=list)


class StorageDeleteResponse(_Response):
    success: bool | None = None


class StorageCreateRequest(_Request):
    """Body of ``POST /v1/compute/clusters/storage/volumes``."""

    region: str
    size_tib: int
    volume_name: str
    instance_cluster_id: str | None = None
    is_lifecycle_independent: bool | None = None
    project_id: str | None = None


class StorageUpdateRequest(_Request):
    """Body of ``PUT /v1/compute/clusters/storage/volumes``: a resize."""

    volume_id: str
    size_tib: int | None = None


# --- node remediations (``.../instances/{instance_id}/remediations``) -----------------------------


class RemediationCreateRequest(_Request):
    """Body of ``POST .../instances/{instance_id}/remediations``."""

    mode: RemediationMode
    reason: str | None = None


class RemediationApproveRequest(_Request):
    """Body of ``POST .../remediations/{id}/approve``: the API refuses ``HOST_POWER_CYCLE`` as ``mode``."""

    comment: str | None = None
    mode: RemediationMode | None = None


class RemediationRejectRequest(_Request):
    """Body of ``POST .../remediations/{id}/reject``."""

    comment: str | None = None


# --- who the key is (``GET /v3/whoami``) -------------------------------------------------------


class WhoamiProject(_Response):
    id: str | None = None
    name: str | None = None
    slug: str | None = None


class WhoamiOrganization(_Response):
    id: str | None = None
    name: str | None = None


class Whoami(_Response):
    """The key's identity; ``type`` says which of the SDK's shapes (``project_api_key``, ...) it is."""

    type: str | None = None
    project: WhoamiProject | None = None
    organization: WhoamiOrganization | None = None
