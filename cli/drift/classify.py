"""Classify a stack's differences between the live resources, the code and the last deployment. Pure.

What goes in (all plain data, see ``together_clusters.cli.drift.observe`` for where it comes from):

- ``deployed``: the real stack's export before the check: what the last deployment recorded, unless a
  ``pulumi refresh`` has rewritten it since;
- ``steps``: what ``pulumi preview --refresh`` would do, one :class:`PlannedStep` per resource. The engine
  refreshes first, so each step's ``live_inputs`` are the live resource and its ``code_inputs`` what the
  code now declares;
- ``baseline``: whether the state still says what the last deployment wrote (:class:`Baseline`).

What comes out. Drift is **live versus code**, whatever refreshes happened:

- **drift**: a field the code owns whose live value differs from the code's, changed outside the code
  (exit 2). The report names resource, field, code value and live value;
- **missing**: a resource the code declares that was deleted outside the code (exit 2);
- **changes pending**: the live resource differs from the code but still matches the last deployment:
  the code changed and was not deployed yet (a pull request, or main ahead of the last ``up``). Its own
  class: exit 0, or 3 with ``fail_on_pending``. New resources and resources the code dropped are pending
  changes too;
- information, never drift: **capacity shortfall** (fewer preemptible GPUs allocated than desired) and
  **preemption churn** (preemptions since the state was written), both normal on preemptible capacity.

Telling drift from a pending change needs the last deployment's value. The state holds it unless a
refresh rewrote the resource's inputs since (see ``together_clusters.cli.drift.baseline``): then every
difference between live and code on that resource is drift, never "pending".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pulumi.runtime.rpc import UNKNOWN

from together_clusters.provider.change_planning import plan_change
from together_clusters.provider.schema import FIELDS

from ..exit_codes import ExitCode
from ..stack_state import (
    StateResource,
    field_label,
    is_bookkeeping,
    is_secret,
    managed_resources,
    short_type,
)
from ..workloads import Stall
from .baseline import Baseline

# The engine's redaction of a secret in engine events.
SECRET_PLACEHOLDER = "[secret]"

# The primary operation of a resource's steps, most telling first (a replace also shows as
# create-replacement and delete-replaced).
_OP_ORDER = ("replace", "update", "create", "delete", "same", "read")
_CHANGE_OPS = frozenset({"replace", "update", "create", "delete"})


@dataclass(frozen=True)
class PlannedStep:
    """What ``preview --refresh`` would do to one resource.

    ``live_inputs``/``live_outputs`` are the refreshed (live) state, ``None`` when there is no live
    resource (it was deleted, or never created); ``code_inputs`` are what the program declares now,
    ``None`` when the program no longer declares the resource. ``diffs`` are the fields the provider's
    diff names, when it names them.
    """

    urn: str
    type: str
    op: str
    live_inputs: Mapping[str, Any] | None
    live_outputs: Mapping[str, Any] | None
    code_inputs: Mapping[str, Any] | None
    diffs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]


@dataclass(frozen=True)
class SpecDrift:
    resource: str
    type: str
    urn: str
    field: str
    code: Any
    live: Any
    deployed: Any


@dataclass(frozen=True)
class Missing:
    resource: str
    type: str
    urn: str
    id: str


@dataclass(frozen=True)
class Shortfall:
    resource: str
    cluster_id: str
    desired_preemptible_gpus: int
    allocated_preemptible_gpus: int
    shortfall_gpus: int


@dataclass(frozen=True)
class Churn:
    resource: str
    cluster_id: str
    preemptions_since_deployment: int
    recent_preemptions: int
    last_preempted_at: str | None


@dataclass(frozen=True)
class PendingChange:
    """A change the code would make that was not caused outside the code: the code changed."""

    resource: str
    type: str
    urn: str
    op: str
    field: str | None = None
    live: Any = None
    code: Any = None


@dataclass(frozen=True)
class DriftReport:
    drift: list[SpecDrift] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    pending: list[PendingChange] = field(default_factory=list)
    shortfall: list[Shortfall] = field(default_factory=list)
    churn: list[Churn] = field(default_factory=list)
    #: Workloads stalled for capacity, read from the clusters' Kubernetes APIs (information, like the
    #: shortfall; exit 4 only with ``fail_on_stalled``), and why a cluster's workloads could not be read.
    stalled: list[Stall] = field(default_factory=list)
    workloads_unread: list[str] = field(default_factory=list)

    @property
    def in_sync(self) -> bool:
        return not self.drift and not self.missing

    def exit_code(self, fail_on_pending: bool = False, fail_on_stalled: bool = False) -> ExitCode:
        """The stack's code: ``DRIFT``, else ``PENDING`` (only with ``fail_on_pending``), else ``STALLED`` (a
        workload waits for capacity, only with ``fail_on_stalled``; see ``together_clusters.cli.workloads``),
        else ``OK``."""
        if not self.in_sync:
            return ExitCode.DRIFT
        if self.pending and fail_on_pending:
            return ExitCode.PENDING
        if self.stalled and fail_on_stalled:
            return ExitCode.STALLED
        return ExitCode.OK

    def to_dict(self, fail_on_pending: bool = False, fail_on_stalled: bool = False) -> dict[str, Any]:
        return {
            "in_sync": self.in_sync,
            "exit_code": self.exit_code(fail_on_pending, fail_on_stalled),
            "drift": [asdict(d) for d in self.drift],
            "missing": [asdict(m) for m in self.missing],
            "pending": [asdict(p) for p in self.pending],
            "info": {
                "capacity_shortfall": [asdict(s) for s in self.shortfall],
                "preemption_churn": [asdict(c) for c in self.churn],
                "stalled_for_capacity": [asdict(s) for s in self.stalled],
                "workloads_unread": list(self.workloads_unread),
            },
        }


def classify(deployed: Mapping[str, Any], steps: Sequence[PlannedStep], baseline: Baseline) -> DriftReport:
    """Sort every difference into drift, missing, pending and information (see the module docstring)."""
    planned = primary_steps(steps)
    report = DriftReport()
    in_state = managed_resources(deployed)
    for res in in_state:
        step = planned.get(res.urn)
        if step is None:
            continue  # gone from the live side and from the code: nothing left to compare
        kind = short_type(res.type)
        if step.live_inputs is None:
            if step.code_inputs is not None:
                report.missing.append(Missing(res.name, kind, res.urn, res.id))
            continue
        if step.code_inputs is None:
            report.pending.append(PendingChange(res.name, kind, res.urn, step.op))
        elif step.op in _CHANGE_OPS:
            _compare(res, step, baseline.trusts(res.modified), report)
        if res.is_cluster:
            report.shortfall.extend(_shortfall(res, step.live_outputs or {}))
            report.churn.extend(_churn(res, step.live_outputs or {}))
    known = {r.urn for r in in_state}
    for urn, step in planned.items():
        if urn not in known and step.op in _CHANGE_OPS and not is_bookkeeping(step.type):
            report.pending.append(PendingChange(step.name, short_type(step.type), urn, step.op))
    return report


def _compare(res: StateResource, step: PlannedStep, trusted: bool, report: DriftReport) -> None:
    live, code = step.live_inputs or {}, step.code_inputs or {}
    kind = short_type(res.type)
    fields = [f for f in step.diffs if not f.startswith("__")] or changed_fields(live, code)
    if res.is_cluster:
        # The provider's own rule decides what differs: a field the code leaves to the server (a driver
        # resolved at create, a project) is no difference, though the engine's diff lists it.
        plan = plan_change(dict(live), dict(code))
        differing = {*plan.replace, *plan.update, *plan.local}
        fields = [f for f in fields if f not in FIELDS or f in differing]
    found = False
    for name in fields:
        now, wanted, deployed = live.get(name), code.get(name), res.inputs.get(name)
        visible = comparable(now, wanted)
        if visible and same_value(now, wanted):
            continue
        found = True
        label = field_label(res.type, name)  # as the program writes it
        # A secret cannot be compared with the deployment: whether it changed outside is unknown.
        if trusted and visible and comparable(now, deployed) and same_value(now, deployed):
            report.pending.append(PendingChange(res.name, kind, res.urn, step.op, label, now, wanted))
        else:
            report.drift.append(
                SpecDrift(res.name, kind, res.urn, label, shown(wanted), shown(now), shown(deployed))
            )
    if not found:
        # The provider wants a change it does not name (a secret input, say): pending, never silent.
        report.pending.append(PendingChange(res.name, kind, res.urn, step.op))


def primary_steps(steps: Sequence[PlannedStep]) -> dict[str, PlannedStep]:
    """One step per URN: the most telling of its operations (see ``_OP_ORDER``)."""
    chosen: dict[str, PlannedStep] = {}
    for step in steps:
        if step.op not in _OP_ORDER:
            continue
        held = chosen.get(step.urn)
        if held is None or _OP_ORDER.index(step.op) < _OP_ORDER.index(held.op):
            chosen[step.urn] = step
    return chosen


def _shortfall(res: StateResource, live: Mapping[str, Any]) -> list[Shortfall]:
    desired = _int(live.get("desired_preemptible_gpus"))
    allocated = _int(live.get("allocated_preemptible_gpus"))
    short = max(desired - allocated, 0)
    if short <= 0:
        return []
    return [Shortfall(res.name, res.id, desired, allocated, short)]


def _churn(res: StateResource, live: Mapping[str, Any]) -> list[Churn]:
    before, now = _int(res.outputs.get("recent_preemptions")), _int(live.get("recent_preemptions"))
    last_before, last_now = res.outputs.get("last_preempted_at"), live.get("last_preempted_at")
    since = max(now - before, 0)
    # "Recent" is a window: old preemptions age out, so a newer last preemption counts even if the
    # count did not grow.
    if since == 0 and last_now and (not last_before or str(last_now) > str(last_before)):
        since = 1
    if since == 0:
        return []
    return [Churn(res.name, res.id, since, now, str(last_now) if last_now else None)]


def shown(value: Any) -> Any:
    """A value fit for a report: a secret (the export holds it decrypted) only as ``[secret]``."""
    return SECRET_PLACEHOLDER if is_secret(value) else value


def comparable(a: Any, b: Any) -> bool:
    """Whether two values can be compared at all: secrets (encrypted or redacted) never are."""
    return not any(is_secret(v) or v == SECRET_PLACEHOLDER for v in (a, b))


def changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The input names whose values differ, in a stable order; internal keys and secrets are skipped."""
    names = sorted(set(before) | set(after))
    return [
        n
        for n in names
        if not n.startswith("__")
        and comparable(before.get(n), after.get(n))
        and not same_value(before.get(n), after.get(n))
    ]


def same_value(a: Any, b: Any) -> bool:
    """Equality as the state means it: an unknown (not yet computed) value equals nothing."""
    if a == UNKNOWN or b == UNKNOWN:
        return False
    return bool(a == b)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
