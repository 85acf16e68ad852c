"""The admin API under ``/_emulator``: steer the emulated platform from tests. No auth, not in OpenAPI."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from .faults import FailedOutcome, FaultSpec
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
        return platform.settings(body.grace_seconds, body.list_lag_s, body.unique_names)

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
