"""The drift reports of one or more stacks for people (text) and machines (JSON). Pure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..table import fmt, table
from ..workloads import describe_stall
from .classify import DriftReport, PendingChange
from .results import StackResult, fleet_exit_code

DRIFT_TITLE = (
    "Drift (live differs from the code, changed outside it; the next `pulumi up` would change it back)"
)
MISSING_TITLE = "Missing (deleted outside the code; the next `pulumi up` would create it again)"
PENDING_TITLE = "Changes pending (the code changed and is not deployed yet; live matches the last deployment)"


def fleet_json(results: Sequence[StackResult], fail_on_pending: bool, fail_on_stalled: bool = False) -> str:
    """``exit_code``, ``fail_on_pending``, ``fail_on_stalled``, ``summary`` and one entry per stack (its
    report or ``error``)."""
    stacks = []
    for r in results:
        entry: dict[str, Any] = {"stack": r.stack, "result": r.verdict, "seconds": round(r.seconds, 2)}
        if r.report is None:
            entry.update({"exit_code": r.exit_code(fail_on_pending), "error": r.error})
        else:
            entry.update(r.report.to_dict(fail_on_pending, fail_on_stalled))
        stacks.append(entry)
    body = {
        "exit_code": fleet_exit_code(results, fail_on_pending, fail_on_stalled),
        "fail_on_pending": fail_on_pending,
        "fail_on_stalled": fail_on_stalled,
        "summary": summary_counts(results),
        "stacks": stacks,
    }
    return json.dumps(body, indent=2, default=str)


def summary_counts(results: Sequence[StackResult]) -> dict[str, list[str]]:
    """The stacks by verdict: ``in_sync``, ``drift``, ``changes_pending``, ``error``."""
    counts: dict[str, list[str]] = {"in_sync": [], "drift": [], "changes_pending": [], "error": []}
    for r in results:
        counts[r.verdict.replace(" ", "_")].append(r.stack)
    return counts


def fleet_text(results: Sequence[StackResult], fail_on_pending: bool, fail_on_stalled: bool = False) -> str:
    """Each stack's report, then (for several stacks) one summary line per stack and the exit code."""
    parts = [stack_text(r) for r in results]
    if len(results) > 1:
        rows = [[r.stack, r.verdict, *_counts(r.report), r.error or ""] for r in results]
        code = fleet_exit_code(results, fail_on_pending, fail_on_stalled)
        parts.append(
            f"Summary of {len(results)} stacks (exit {code}):\n"
            + table(["STACK", "RESULT", "DRIFT", "MISSING", "PENDING", "ERROR"], rows)
        )
    return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"


def stack_text(result: StackResult) -> str:
    if result.report is None:
        return f"Stack {result.stack}: ERROR: {result.error}\n"
    return drift_text(result.stack, result.report)


def drift_text(stack: str, report: DriftReport) -> str:
    """One stack's report: a verdict line, then one table per kind of difference."""
    parts = [_verdict(stack, report)]
    if report.drift:
        parts.append(
            f"{DRIFT_TITLE}:\n"
            + table(
                ["RESOURCE", "TYPE", "FIELD", "CODE", "LIVE"],
                [[d.resource, d.type, d.field, fmt(d.code), fmt(d.live)] for d in report.drift],
            )
        )
    if report.missing:
        parts.append(
            f"{MISSING_TITLE}:\n"
            + table(["RESOURCE", "TYPE", "ID"], [[m.resource, m.type, m.id] for m in report.missing])
        )
    if report.pending:
        parts.append(
            f"{PENDING_TITLE}:\n"
            + table(
                ["RESOURCE", "TYPE", "OP", "FIELD", "LIVE", "CODE"],
                [[p.resource, p.type, *pending_change_cells(p)] for p in report.pending],
            )
        )
    info = info_lines(report)
    if info:
        parts.append("Information only (not drift):\n" + "\n".join(f"  - {line}" for line in info))
    return "\n\n".join(parts) + "\n"


def _verdict(stack: str, report: DriftReport) -> str:
    pending = f"; {plural(len(report.pending), 'change')} pending" if report.pending else ""
    if report.in_sync:
        return f"Stack {stack}: in sync (no drift){pending}."
    counts = []
    if report.drift:
        counts.append(plural(len(report.drift), "changed field"))
    if report.missing:
        counts.append(plural(len(report.missing), "missing resource"))
    return f"Stack {stack}: DRIFT FOUND ({', '.join(counts)}){pending}."


def pending_change_cells(change: PendingChange) -> list[str]:
    """A pending change's operation, field, live and code values as table cells (the values blank without a field)."""
    shown = bool(change.field)
    return [
        change.op,
        change.field or "",
        fmt(change.live) if shown else "",
        fmt(change.code) if shown else "",
    ]


def info_lines(report: DriftReport) -> list[str]:
    lines = []
    for s in report.shortfall:
        lines.append(
            f"capacity shortfall: {s.resource} has {s.allocated_preemptible_gpus} of "
            f"{s.desired_preemptible_gpus} preemptible GPUs allocated ({s.shortfall_gpus} short; "
            "filled as capacity frees up)"
        )
    for c in report.churn:
        last = f", last at {c.last_preempted_at}" if c.last_preempted_at else ""
        lines.append(
            f"preemption churn: {c.resource} had {plural(c.preemptions_since_deployment, 'preemption')} "
            f"since the state was written{last}"
        )
    lines += [describe_stall(s) for s in report.stalled]
    lines += [f"workloads not read: {why}" for why in report.workloads_unread]
    return lines


def _counts(report: DriftReport | None) -> list[str]:
    if report is None:
        return ["", "", ""]
    return [str(len(report.drift)), str(len(report.missing)), str(len(report.pending))]


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
