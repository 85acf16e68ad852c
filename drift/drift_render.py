"""The drift report for people (a text table) and for machines (JSON). Pure."""

from __future__ import annotations

import json
from typing import Any

from .classify import DriftReport
from .table import fmt, table


def drift_json(stack: str, report: DriftReport) -> str:
    """The report as JSON: ``stack``, ``in_sync``, ``exit_code``, ``drift``, ``missing``, ``info``."""
    return json.dumps({"stack": stack, **report.to_dict()}, indent=2, sort_keys=False, default=str)


def drift_text(stack: str, report: DriftReport) -> str:
    """The report as people read it: a verdict line, then one table per kind of difference."""
    parts = [_verdict(stack, report)]
    if report.drift:
        parts.append(
            "Spec drift (changed outside the code; the next `pulumi up` would change it back):\n"
            + table(
                ["RESOURCE", "TYPE", "FIELD", "CODE", "LIVE"],
                [[d.resource, d.type, d.field, fmt(d.code), fmt(d.live)] for d in report.drift],
            )
        )
    if report.missing:
        parts.append(
            "Missing (deleted outside the code; the next `pulumi up` would create it again):\n"
            + table(["RESOURCE", "TYPE", "ID"], [[m.resource, m.type, m.id] for m in report.missing])
        )
    info = _info_lines(report)
    if info:
        parts.append("Information only (not drift):\n" + "\n".join(f"  - {line}" for line in info))
    return "\n\n".join(parts) + "\n"


def _verdict(stack: str, report: DriftReport) -> str:
    if report.in_sync:
        return f"Stack {stack}: in sync (no drift)."
    counts = []
    if report.drift:
        counts.append(_plural(len(report.drift), "changed field"))
    if report.missing:
        counts.append(_plural(len(report.missing), "missing resource"))
    return f"Stack {stack}: DRIFT FOUND ({', '.join(counts)})."


def _info_lines(report: DriftReport) -> list[str]:
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
            f"preemption churn: {c.resource} had {_plural(c.preemptions_since_deployment, 'preemption')} "
            f"since the last deployment{last}"
        )
    for p in report.pending:
        what = f"{p.field}: {fmt(p.live)} -> {fmt(p.code)}" if p.field else p.op
        lines.append(f"pending code change: {p.resource} ({p.type}) {what}")
    return lines


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def error_json(stack: str, message: str) -> str:
    body: dict[str, Any] = {"stack": stack, "in_sync": None, "exit_code": 1, "error": message}
    return json.dumps(body, indent=2)
