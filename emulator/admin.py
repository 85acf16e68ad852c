"""The admin API under ``/_emulator``: steer the emulated platform from tests. No auth, not in OpenAPI."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from .faults import FailedOutcome, FaultSpec
from .remediations import Outcome
from .shapes import RemediationMode
from .state import Platform


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PreemptBody(_Body):
    cluster_id: str
    count: int | None = None
    node_ids: list[str] | None = None


class CapacityBody(_Body):
    region: str
    gpu_type: str
    preemptible_gpus: int


class DemandBody(_Body):
    """A cluster's demand, as the scheduler would report it (see emulator/autoscaling.py)."""

    cluster_id: str
    pending_gpus: int
    busy_node_ids: list[str] | None = None


class CapacityPoolBody(_Body):
    """A capacity pool: ``size_gpus`` GPUs of ``gpu_type`` in ``region`` that clusters draw on by ``pool_id``."""

    pool_id: str
    region: str
    gpu_type: str
    size_gpus: int


class ProvisioningFaultBody(_Body):
    outcome: FailedOutcome
    count: int = 1


class ClockBody(_Body):
    speed: float | None = None
    advance_s: float | None = None


class SettingsBody(_Body):
    grace_seconds: float | None = None
    list_lag_s: float | None = None
    unique_names: bool | None = None
    remediation_timings: dict[str, Any] | None = None


class RaiseRemediationBody(_Body):
    """An automated remediation, as the platform's passive health checks raise one."""

    cluster_id: str
    instance_id: str
    mode: RemediationMode | None = None
    alert: Literal["xid", "slurm_node_unavailable"] = "xid"
    xid_code: str = "79"
    xid_count: int = 1
    reason: str | None = None
    outcome: Literal["succeed", "fail"] = "succeed"


class OutcomeBody(_Body):
    outcome: Outcome
    error_message: str | None = None


class AutoRemediationBody(_Body):
    cluster_id: str
    enabled: bool
    instance_ids: list[str] | None = None


def router(platform: Platform) -> APIRouter:
    """The admin routes, steering ``platform``."""
    r = APIRouter(prefix="/_emulator", include_in_schema=False)

    @r.post("/preempt")
    def preempt(body: PreemptBody) -> dict[str, Any]:
        return platform.preempt(body.cluster_id, body.count, body.node_ids)

    @r.put("/capacity")
    def set_capacity(body: CapacityBody) -> dict[str, Any]:
        return platform.set_capacity(body.region, body.gpu_type, body.preemptible_gpus)

    @r.get("/capacity")
    def capacity() -> dict[str, Any]:
        return {"pools": platform.capacity()}

    @r.post("/autoscaling")
    def set_demand(body: DemandBody) -> dict[str, Any]:
        return platform.set_demand(body.cluster_id, body.pending_gpus, body.busy_node_ids)

    @r.put("/capacity-pools")
    def set_capacity_pool(body: CapacityPoolBody) -> dict[str, Any]:
        return platform.set_capacity_pool(body.pool_id, body.region, body.gpu_type, body.size_gpus)

    @r.get("/capacity-pools")
    def capacity_pools() -> dict[str, Any]:
        return {"capacity_pools": platform.capacity_pools()}

    @r.get("/ignored-fields")
    def ignored_fields() -> dict[str, Any]:
        return {"requests": platform.ignored_fields()}

    @r.delete("/ignored-fields")
    def clear_ignored_fields() -> dict[str, Any]:
        platform.clear_ignored_fields()
        return {"requests": []}

    @r.post("/faults")
    def add_fault(body: FaultSpec) -> dict[str, Any]:
        return platform.add_fault(body).model_dump()

    @r.get("/faults")
    def list_faults() -> dict[str, Any]:
        return {
            "faults": [f.model_dump() for f in platform.list_faults()],
            "provisioning_faults": platform.pending_provisioning_faults(),
        }

    @r.delete("/faults")
    def clear_faults() -> dict[str, Any]:
        platform.clear_faults()
        return {"faults": [], "provisioning_faults": []}

    @r.post("/provisioning-faults")
    def add_provisioning_faults(body: ProvisioningFaultBody) -> dict[str, Any]:
        return {"pending": platform.add_provisioning_faults(body.outcome, body.count)}

    @r.get("/clock")
    def clock() -> dict[str, Any]:
        return platform.clock_info()

    @r.post("/clock")
    def set_clock(body: ClockBody) -> dict[str, Any]:
        return platform.set_clock(body.speed, body.advance_s)

    @r.get("/settings")
    def settings() -> dict[str, Any]:
        return platform.settings()

    @r.post("/settings")
    def set_settings(body: SettingsBody) -> dict[str, Any]:
        return platform.settings(
            body.grace_seconds, body.list_lag_s, body.unique_names, body.remediation_timings
        )

    @r.post("/remediations")
    def raise_remediation(body: RaiseRemediationBody) -> dict[str, Any]:
        return platform.raise_remediation(
            body.cluster_id,
            body.instance_id,
            body.mode,
            body.alert,
            body.xid_code,
            body.xid_count,
            body.reason,
            body.outcome,
        )

    @r.get("/remediations")
    def remediations() -> dict[str, Any]:
        return {"remediations": platform.all_remediations()}

    @r.post("/remediations/{remediation_id}/outcome")
    def remediation_outcome(remediation_id: str, body: OutcomeBody) -> dict[str, Any]:
        return platform.set_remediation_outcome(remediation_id, body.outcome, body.error_message)

    @r.post("/auto-remediation")
    def auto_remediation(body: AutoRemediationBody) -> dict[str, Any]:
        return platform.set_auto_remediation(body.cluster_id, body.enabled, body.instance_ids)

    @r.post("/reset")
    def reset() -> dict[str, Any]:
        platform.reset()
        return {"reset": True}

    @r.get("/clusters")
    def clusters() -> dict[str, Any]:
        return {"clusters": platform.all_clusters()}

    @r.get("/volumes")
    def volumes() -> dict[str, Any]:
        return {"volumes": platform.all_volumes()}

    return r
