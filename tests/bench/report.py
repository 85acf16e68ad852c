"""The results table (Markdown) and the same figures as JSON. Pure: figures in, text out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .figures import Figure, format_value

VERDICT_MARK = {"met": "met", "missed": "**missed**", "no goal": "—", "not available": "not available"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(figures: Sequence[Figure], machine: dict[str, Any], quick: bool) -> str:
    lines = [
        f"# Benchmark results{' (quick smoke run: tiny sizes, one repetition; not figures)' if quick else ''}",
        "",
        "Written by `scripts/bench`; ratios are medians of interleaved repetitions in one run.",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()),
        "",
        "| figure | value | floor | goal | verdict | notes |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    section = None
    for f in figures:
        if f.section != section:
            section = f.section
            lines.append(f"| **{_cell(section)}** | | | | | |")
        goal = str(f.goal) if f.goal is not None else "—"
        cells = [f.name, format_value(f.value, f.unit), f.floor or "—", goal, VERDICT_MARK[f.verdict], f.note]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    missed = [f for f in figures if f.verdict == "missed"]
    lines += ["", f"{len(missed)} of {sum(f.goal is not None for f in figures)} goals missed."]
    return "\n".join(lines) + "\n"


def as_json(figures: Sequence[Figure], machine: dict[str, Any], quick: bool) -> str:
    return (
        json.dumps({"quick": quick, "machine": machine, "figures": [f.as_json() for f in figures]}, indent=2)
        + "\n"
    )
