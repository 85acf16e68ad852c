"""The platform's internal records: what the emulator stores, before rendering to the API shape.

Times are emulated seconds since the Unix epoch. Phase schedules may hold entries in the future:
a record is rendered as of a given time, so what is visible follows the clock without a worker thread.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .catalog import GPUS_PER_NODE

ComputeClass = Literal["standard", "preemptible"]
ProvisioningOutcome = Literal["ready", "acceptance_tests_failed", "nccl_tests_failed", "stuck"]


class Timed(BaseModel):
    """A phase entered at ``at``."""

    phase: str
    at: float


class NodeRecord(BaseModel):
    node_id: str
    instance_id: str
    compute_class: ComputeClass
    schedule: list[Timed]
    cordoned_at: float | None = None
    remove_at: float | None = None
    deleted_at: float | None = None

    @property
    def appears_at(self) -> float:
        return self.schedule[0].at


class EventRecord(BaseModel):
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
    gpu_type: str
    billing_type: str
    cluster_type: str
    num_gpus: int
    desired_preemptible_gpus: int
    num_reserved_gpus: int
    num_capacity_pool_gpus: int
    driver: dict[str, str]
    created_at: float
    kube_token: str
    outcome: ProvisioningOutcome = "ready"
    schedule: list[Timed]
    control_plane: NodeRecord
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

    @property
    def deleting(self) -> bool:
        return self.deleting_since is not None

    def live(self, compute_class: ComputeClass) -> list[NodeRecord]:
        return [n for n in self.nodes if n.compute_class == compute_class]

    @property
    def allocated_preemptible_gpus(self) -> int:
        return GPUS_PER_NODE * len(self.live("preemptible"))


class FaultRule(BaseModel):
    """An HTTP fault for the next ``count`` requests matching ``method`` and the ``path`` prefix."""

    id: str
    count: int = Field(ge=1)
    status: int | None = Field(default=None, ge=400, le=599)
    path: str = "/v1/"
    method: str | None = None
    delay_s: float = Field(default=0.0, ge=0)
    after_commit: bool = False
    retry_after: float | None = Field(default=None, ge=0)
    message: str | None = None

    def matches(self, method: str, path: str) -> bool:
        return path.startswith(self.path) and (self.method is None or self.method.upper() == method.upper())
