"""The results table (Markdown) and the same figures as JSON. Pure: figures in, text out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .figures import Figure, format_value

VERDICT_MARK = {"met": "met", "missed": "**missed**", "no goal": "—", "not available": "not available"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(figures: Sequence[Figure], machines: dict[str, dict[str, Any]], quick: bool) -> str:
    """The table; ``machines`` describes each run (by its date) whose figures are in it."""
    lines = [
        f"# Benchmark results{' (quick smoke run: tiny sizes, one repetition; not figures)' if quick else ''}",
        "",
        "Written by `scripts/bench`; ratios are medians of interleaved repetitions in one run.",
        "",
    ]
    for date, machine in sorted(machines.items()):
        sections = sorted({f.section.split(".")[0] for f in figures if f.run == date}, key=int)
        lines.append(
            f"- Run of {date} (sections {', '.join(sections)}): "
            + ", ".join(f"{k} {v}" for k, v in machine.items() if k != "date")
        )
    lines += [
        "",
        "| figure | value | floor | goal | verdict | notes |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    section = None
    for f in figures:
        if f.section != section:
            section = f.section
            lines.append(f"| **{_cell(section)}** (run of {f.run}) | | | | | |")
        goal = str(f.goal) if f.goal is not None else "—"
        cells = [f.name, format_value(f.value, f.unit), f.floor or "—", goal, VERDICT_MARK[f.verdict], f.note]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    missed = [f for f in figures if f.verdict == "missed"]
    lines += ["", f"{len(missed)} of {sum(f.goal is not None for f in figures)} goals missed."]
    return "\n".join(lines) + "\n"


def as_json(figures: Sequence[Figure], machines: dict[str, dict[str, Any]], quick: bool) -> str:
    body = {"quick": quick, "machines": machines, "figures": [f.as_json() for f in figures]}
    return json.dumps(body, indent=2) + "\n"


def carried_over(
    previous: dict[str, Any], sections: set[str]
) -> tuple[list[Figure], dict[str, dict[str, Any]]]:
    """The figures of an earlier results file outside ``sections``, and the machines of their runs."""
    kept = [Figure.from_json(f) for f in previous.get("figures", []) if f["section"] not in sections]
    runs = {f.run for f in kept}
    machines = {date: m for date, m in (previous.get("machines") or {}).items() if date in runs}
    return kept, machines
