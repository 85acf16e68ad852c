"""Classify the differences between a stack's last deployment, the live resources and the code. Pure.

Three documents go in, all plain data:

- ``deployed``: the real stack's export, i.e. what the last deployment recorded;
- ``refreshed``: the same state after ``pulumi refresh`` (on a copy), i.e. what is live now;
- ``steps``: the ``steps`` of ``pulumi preview --json`` run on the refreshed copy, i.e. what the code
  would do to the live resources (``None`` when no preview was run).

What comes out:

- **spec drift**: an input that differs between the last deployment and the live resource, and that the
  code still sets otherwise: someone changed it outside the code and the next ``up`` would change it back;
- **missing**: a resource of the last deployment that no longer exists;
- information only, never drift: **capacity shortfall** (fewer preemptible GPUs allocated than desired)
  and **preemption churn** (preemptions since the last deployment), both normal on preemptible capacity,
  and **pending code changes** (the code differs from what was deployed, e.g. in a pull request).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .stack_state import UNKNOWN, StateResource, is_bookkeeping, is_secret, managed_resources, short_type

EXIT_IN_SYNC = 0
EXIT_ERROR = 1
EXIT_DRIFT = 2

# Preview operations that leave a resource as it is.
_NO_CHANGE_OPS = frozenset({"same", "read", "refresh"})


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
    """A difference between the code and the live resource that was not made outside the code."""

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
    shortfall: list[Shortfall] = field(default_factory=list)
    churn: list[Churn] = field(default_factory=list)
    pending: list[PendingChange] = field(default_factory=list)

    @property
    def in_sync(self) -> bool:
        return not self.drift and not self.missing

    @property
    def exit_code(self) -> int:
        return EXIT_IN_SYNC if self.in_sync else EXIT_DRIFT

    def to_dict(self) -> dict[str, Any]:
        return {
            "in_sync": self.in_sync,
            "exit_code": self.exit_code,
            "drift": [asdict(d) for d in self.drift],
            "missing": [asdict(m) for m in self.missing],
            "info": {
                "capacity_shortfall": [asdict(s) for s in self.shortfall],
                "preemption_churn": [asdict(c) for c in self.churn],
                "pending_code_changes": [asdict(p) for p in self.pending],
            },
        }


@dataclass(frozen=True)
class _Plan:
    """What the preview would do to one URN: its operations and the inputs the code gives it."""

    ops: frozenset[str]
    code_inputs: dict[str, Any] | None
    diff_keys: tuple[str, ...]

    @property
    def changes(self) -> bool:
        return not self.ops <= _NO_CHANGE_OPS

    @property
    def op(self) -> str:
        for op in ("replace", "update", "create", "delete"):
            if op in self.ops:
                return op
        return sorted(self.ops)[0] if self.ops else "same"


def classify(
    deployed: Mapping[str, Any],
    refreshed: Mapping[str, Any],
    steps: Sequence[Mapping[str, Any]] | None = None,
) -> DriftReport:
    """Sort every difference into drift, missing, and information (see the module docstring)."""
    live_by_urn = {r.urn: r for r in managed_resources(refreshed)}
    plans = _plans(steps) if steps is not None else None
    report = DriftReport()
    deployed_resources = managed_resources(deployed)
    for res in deployed_resources:
        live = live_by_urn.get(res.urn)
        if live is None:
            report.missing.append(Missing(res.name, short_type(res.type), res.urn, res.id))
            continue
        plan = plans.get(res.urn) if plans is not None else None
        report.drift.extend(_spec_drift(res, live, plan, plans is not None))
        if plan is not None:
            report.pending.extend(_pending(res, live, plan))
        if live.is_cluster:
            report.shortfall.extend(_shortfall(live))
            report.churn.extend(_churn(res, live))
    if plans is not None:
        known = {r.urn for r in deployed_resources}
        for urn, plan in plans.items():
            if urn not in known and plan.changes and not _is_bookkeeping_urn(urn):
                name, type_ = _name_and_type(urn)
                report.pending.append(PendingChange(name, short_type(type_), urn, plan.op))
    return report


def _spec_drift(
    res: StateResource, live: StateResource, plan: _Plan | None, previewed: bool
) -> list[SpecDrift]:
    changed = changed_fields(res.inputs, live.inputs)
    if not changed:
        return []
    if previewed:
        # No step, or one that changes nothing: the code accepts the live values (e.g. the code was
        # updated to match a change made by hand). A resource the code no longer declares is a pending
        # deletion, not drift.
        if plan is None or not plan.changes or plan.code_inputs is None:
            return []
        code_inputs = plan.code_inputs
    else:
        code_inputs = res.inputs
    found = []
    for name in changed:
        code, now = code_inputs.get(name), live.inputs.get(name)
        if previewed and same_value(code, now):
            continue
        found.append(
            SpecDrift(res.name, short_type(res.type), res.urn, name, code, now, res.inputs.get(name))
        )
    return found


def _pending(res: StateResource, live: StateResource, plan: _Plan) -> list[PendingChange]:
    if not plan.changes:
        return []
    name, type_ = res.name, short_type(res.type)
    if plan.code_inputs is None:
        return [PendingChange(name, type_, res.urn, plan.op)]
    drifted = set(changed_fields(res.inputs, live.inputs))
    candidates = plan.diff_keys or changed_fields(live.inputs, plan.code_inputs)
    return [
        PendingChange(name, type_, res.urn, plan.op, f, live.inputs.get(f), plan.code_inputs.get(f))
        for f in candidates
        if f not in drifted and not same_value(live.inputs.get(f), plan.code_inputs.get(f))
    ]


def _shortfall(live: StateResource) -> list[Shortfall]:
    out = live.outputs
    desired = _int(out.get("desired_preemptible_gpus"))
    allocated = _int(out.get("allocated_preemptible_gpus"))
    short = max(desired - allocated, 0)
    if short <= 0:
        return []
    return [Shortfall(live.name, live.id, desired, allocated, short)]


def _churn(res: StateResource, live: StateResource) -> list[Churn]:
    before, now = _int(res.outputs.get("recent_preemptions")), _int(live.outputs.get("recent_preemptions"))
    last_before, last_now = res.outputs.get("last_preempted_at"), live.outputs.get("last_preempted_at")
    since = max(now - before, 0)
    # "Recent" is a window: old preemptions age out, so a newer last preemption counts even if the
    # count did not grow.
    if since == 0 and last_now and (not last_before or str(last_now) > str(last_before)):
        since = 1
    if since == 0:
        return []
    return [Churn(live.name, live.id, since, now, str(last_now) if last_now else None)]


def changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The input names whose values differ, in a stable order; internal keys and secrets are skipped."""
    names = sorted(set(before) | set(after))
    return [
        n
        for n in names
        if not n.startswith("__")
        and not is_secret(before.get(n))
        and not is_secret(after.get(n))
        and not same_value(before.get(n), after.get(n))
    ]


def same_value(a: Any, b: Any) -> bool:
    """Equality as the state means it: an unknown (not yet computed) value equals nothing."""
    if a == UNKNOWN or b == UNKNOWN:
        return False
    return bool(a == b)


def _plans(steps: Sequence[Mapping[str, Any]]) -> dict[str, _Plan]:
    ops: dict[str, set[str]] = {}
    inputs: dict[str, dict[str, Any]] = {}
    keys: dict[str, list[str]] = {}
    for step in steps:
        urn = step.get("urn")
        if not urn:
            continue
        op = str(step.get("op") or "same")
        ops.setdefault(urn, set()).add(op)
        new_state = step.get("newState") or {}
        if op not in ("delete", "delete-replaced", "discard") and "inputs" in new_state:
            inputs[urn] = dict(new_state.get("inputs") or {})
        for key in [*(step.get("diffReasons") or []), *(step.get("replaceReasons") or [])]:
            top = str(key).split(".", 1)[0].split("[", 1)[0]
            if top not in keys.setdefault(urn, []):
                keys[urn].append(top)
    return {urn: _Plan(frozenset(o), inputs.get(urn), tuple(keys.get(urn, ()))) for urn, o in ops.items()}


def _name_and_type(urn: str) -> tuple[str, str]:
    # urn:pulumi:STACK::PROJECT::[PARENT$]TYPE::NAME
    parts = urn.split("::")
    type_ = parts[2].rsplit("$", 1)[-1] if len(parts) > 3 else ""
    return parts[-1], type_


def _is_bookkeeping_urn(urn: str) -> bool:
    return is_bookkeeping(_name_and_type(urn)[1])


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
