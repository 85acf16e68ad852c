"""Injected faults: HTTP faults for matching requests, and provisioning outcomes for the next creates."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .errors import invalid

ProvisioningOutcome = Literal["ready", "acceptance_tests_failed", "nccl_tests_failed", "stuck"]
FailedOutcome = Literal["acceptance_tests_failed", "nccl_tests_failed", "stuck"]
# What happens to the reply of a request that took effect: cut in half, replaced by a non-JSON page,
# merged with ``patch`` (top-level fields), or never sent (the connection is closed). "reset" closes the
# connection before the request takes effect: nothing changes.
ReplyFault = Literal["truncated", "invalid_json", "patch", "drop", "reset"]


class FaultSpec(BaseModel):
    """An HTTP fault for the next ``count`` requests matching ``method`` and the ``path`` prefix.

    - ``status``: answer with that error instead of serving the request; with ``after_commit``, serve it
      (it takes effect) and answer the error instead of its reply.
    - ``delay_s`` (real seconds): hold the request that long before it takes effect (a slow commit: it
      still takes effect if the client gave up), or with ``after_commit`` hold its reply (a slow reply).
    - ``reply``: serve the request, then cut, garble (``patch``) or drop its reply (always after commit);
      ``"reset"``: close the connection without serving the request.
    """

    model_config = ConfigDict(extra="forbid")

    status: int | None = Field(default=None, ge=400, le=599)
    count: int = Field(default=1, ge=1)
    path: str = "/v1/"
    method: str | None = None
    delay_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    after_commit: bool = False
    retry_after: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    message: str | None = None
    reply: ReplyFault | None = None
    patch: dict[str, Any] | None = None

    @property
    def commits_first(self) -> bool:
        """Whether the request takes effect before the fault acts on its reply."""
        return self.after_commit or self.reply not in (None, "reset")


class FaultRule(FaultSpec):
    """A fault waiting to happen; ``count`` goes down each time it does."""

    id: str

    def matches(self, method: str, path: str) -> bool:
        return path.startswith(self.path) and (self.method is None or self.method.upper() == method.upper())


class FaultQueue:
    """The pending faults. Not thread-safe on its own: the platform only touches it under its lock."""

    def __init__(self) -> None:
        self.rules: list[FaultRule] = []
        self.outcomes: list[FailedOutcome] = []

    def add(self, spec: FaultSpec) -> FaultRule:
        if spec.status is None and spec.delay_s == 0 and spec.reply is None:
            raise invalid("a fault needs a status, a delay_s or a reply fault", "status")
        if spec.status is not None and spec.reply is not None:
            raise invalid(f"give status or reply, not both; got reply={spec.reply!r}", "reply")
        if (spec.reply == "patch") != (spec.patch is not None):
            raise invalid(
                f"patch (the fields to merge into the reply) goes with reply='patch'; got reply={spec.reply!r}",
                "patch",
            )
        rule = FaultRule(id=f"fault-{uuid.uuid4().hex[:8]}", **spec.model_dump())
        self.rules.append(rule)
        return rule

    def take(self, method: str, path: str) -> FaultRule | None:
        """The first rule matching the request, counted down; ``None`` when no fault applies."""
        for rule in self.rules:
            if rule.matches(method, path):
                rule.count -= 1
                if rule.count <= 0:
                    self.rules.remove(rule)
                return rule.model_copy()
        return None

    def add_outcomes(self, outcome: FailedOutcome, count: int) -> None:
        if count < 1:
            raise invalid(f"count must be at least 1; got {count}", "count")
        self.outcomes.extend([outcome] * count)

    def next_outcome(self) -> ProvisioningOutcome:
        """How the next created cluster's provisioning ends."""
        return self.outcomes.pop(0) if self.outcomes else "ready"

    def clear(self) -> None:
        self.rules.clear()
        self.outcomes.clear()

    def to_json(self) -> dict[str, Any]:
        return {"faults": [r.model_dump() for r in self.rules], "provisioning_faults": list(self.outcomes)}

    def load_json(self, saved: dict[str, Any]) -> None:
        self.rules = [FaultRule.model_validate(r) for r in saved["faults"]]
        self.outcomes = list(saved["provisioning_faults"])
