"""The drift check of a fleet of stacks as Markdown, for a CI job summary or a pull-request comment. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from ..table import fmt
from .report import DRIFT_TITLE, MISSING_TITLE, PENDING_TITLE, info_lines, pending_change_cells, plural
from .results import StackResult, fleet_exit_code

_ICONS = {"in sync": "✅", "changes pending": "📝", "drift": "❌", "error": "⚠️"}


def markdown_summary(
    results: Sequence[StackResult], fail_on_pending: bool, fail_on_stalled: bool = False
) -> str:
    code = fleet_exit_code(results, fail_on_pending, fail_on_stalled)
    drifted = [r.stack for r in results if r.verdict == "drift"]
    failed = [r.stack for r in results if r.verdict == "error"]
    headline = (
        f"❌ drift in {plural(len(drifted), 'stack')} of {len(results)}"
        if drifted
        else f"✅ no drift in {plural(len(results), 'stack')}"
    )
    if failed:
        headline += f", ⚠️ {len(failed)} could not be checked"
    lines = [f"## Drift check: {headline} (exit {code})", ""]
    lines += _table(
        ["Stack", "Result", "Drift", "Missing", "Pending"],
        [
            [
                r.stack,
                f"{_ICONS[r.verdict]} {r.verdict}",
                *(
                    [str(len(r.report.drift)), str(len(r.report.missing)), str(len(r.report.pending))]
                    if r.report
                    else ["", "", ""]
                ),
            ]
            for r in results
        ],
    )
    for r in results:
        lines += ["", *_details(r)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _details(result: StackResult) -> list[str]:
    report = result.report
    if report is None:
        return [f"### {result.stack}", "", f"Could not be checked: `{result.error}`"]
    if report.in_sync and not report.pending and not info_lines(report):
        return []
    out = [f"### {result.stack}"]
    if report.drift:
        out += ["", f"**{DRIFT_TITLE}**", ""]
        out += _table(
            ["Resource", "Type", "Field", "Code", "Live"],
            [[d.resource, d.type, d.field, fmt(d.code), fmt(d.live)] for d in report.drift],
        )
    if report.missing:
        out += ["", f"**{MISSING_TITLE}**", ""]
        out += _table(["Resource", "Type", "ID"], [[m.resource, m.type, m.id] for m in report.missing])
    if report.pending:
        out += ["", f"**{PENDING_TITLE}**", ""]
        out += _table(
            ["Resource", "Op", "Field", "Live", "Code"],
            [[p.resource, *pending_change_cells(p)] for p in report.pending],
        )
    info = info_lines(report)
    if info:
        out += ["", "Information only (not drift):", "", *(f"- {line}" for line in info)]
    return out


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    def row(cells: list[str]) -> str:
        return "| " + " | ".join(_cell(c) for c in cells) + " |"

    return [row(headers), "|" + "|".join("---" for _ in headers) + "|", *(row(r) for r in rows)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
