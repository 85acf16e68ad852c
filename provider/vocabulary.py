"""The API's enumerations (names as in the official ``together`` SDK), without pydantic.

The rules check inputs against these at preview; keeping them apart from the models lets a preview of
unchanged clusters run without loading pydantic.
"""

from __future__ import annotations

from typing import Literal, get_args

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
ACTIVE_REMEDIATION_STATES: tuple[RemediationState, ...] = (
    "PENDING_APPROVAL",
    "PENDING",
    "QUARANTINING",
    "QUARANTINED",
    "RUNNING",
)
"""A remediation still under way, in the order it passes them: an instance has at most one (the API refuses a
second with 409)."""
ENDED_REMEDIATION_STATES: tuple[RemediationState, ...] = ("SUCCEEDED", "FAILED", "CANCELLED", "AUTO_RESOLVED")
DcgmDiagLevel = Literal[
    "DCGM_DIAG_LEVEL_SHORT", "DCGM_DIAG_LEVEL_MEDIUM", "DCGM_DIAG_LEVEL_LONG", "DCGM_DIAG_LEVEL_EXTENDED"
]

GPU_TYPES: tuple[str, ...] = get_args(GpuType)
BILLING_TYPES: tuple[str, ...] = get_args(BillingType)
CLUSTER_TYPES: tuple[str, ...] = get_args(ClusterType)
LOAD_BALANCERS: tuple[str, ...] = get_args(LoadBalancer)
