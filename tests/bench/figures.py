"""What a benchmark reports: a figure beside its floor and its goal, and the verdict. Pure.

A figure is usually a ratio of medians (ours / the floor, measured side by side in the same run), so
that a noisy machine slows both sides alike. Some goals are absolute (GET/s, seconds of lag, API
calls): the figure then carries its unit and the floor is shown for context.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Verdict = Literal["met", "missed", "no goal", "not available"]


@dataclass(frozen=True)
class Goal:
    """``value <op> target``, e.g. ``Goal("<=", 1.2, "x")`` for "at most 1.2x the floor"."""

    op: Literal["<=", ">="]
    target: float
    unit: str = "x"

    def holds(self, value: float) -> bool:
        return value <= self.target if self.op == "<=" else value >= self.target

    def __str__(self) -> str:
        word = "at most" if self.op == "<=" else "at least"
        return f"{word} {format_value(self.target, self.unit)}"


@dataclass(frozen=True)
class Figure:
    """One measured figure: ``value`` (in ``unit``) against ``goal``; ``floor`` says what it is compared to."""

    section: str
    name: str
    value: float | None
    unit: str
    floor: str
    goal: Goal | None = None
    note: str = ""
    samples: dict[str, list[float]] = field(default_factory=dict)
    #: The goal was missed whatever the value says (e.g. the operation failed under a memory cap).
    failed: bool = False
    #: When the run that measured it started (a results file may gather sections of several runs).
    run: str = ""

    @property
    def verdict(self) -> Verdict:
        if self.failed:
            return "missed"
        if self.value is None:
            return "not available"
        if self.goal is None:
            return "no goal"
        return "met" if self.goal.holds(self.value) else "missed"

    def as_json(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "floor": self.floor,
            "goal": None if self.goal is None else {"op": self.goal.op, "target": self.goal.target},
            "goal_text": "" if self.goal is None else str(self.goal),
            "verdict": self.verdict,
            "note": self.note,
            "samples": self.samples,
            "failed": self.failed,
            "run": self.run,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Figure:
        goal = data.get("goal")
        return Figure(
            section=data["section"],
            name=data["name"],
            value=data["value"],
            unit=data["unit"],
            floor=data["floor"],
            goal=Goal(goal["op"], goal["target"], data["unit"]) if goal else None,
            note=data["note"],
            samples=data.get("samples") or {},
            failed=bool(data.get("failed")),
            run=data.get("run", ""),
        )


def unavailable(section: str, name: str, reason: str, goal: Goal | None = None) -> Figure:
    """A figure that could not be measured in this run, saying why (never a made-up number)."""
    return Figure(section, name, None, "", "", goal, note=f"not available: {reason}")


def median(samples: Sequence[float]) -> float:
    if not samples:
        raise ValueError("no samples")
    return float(statistics.median(samples))


def ratio(ours: Sequence[float], floor: Sequence[float]) -> float:
    """Median of ours over median of the floor (times: above 1 means slower than the floor)."""
    return median(ours) / median(floor)


def interleaved(
    ours: str, floor: str, measure: Callable[[str, int], float], progress: Callable[[str], None]
) -> dict[str, list[float]]:
    """Each of two kinds measured twice, A B then B A (``measure(kind, i)``, ``i`` its how-manieth run of that
    kind): the samples by kind, for :func:`ratio`."""
    samples: dict[str, list[float]] = {ours: [], floor: []}
    for order in ((ours, floor), (floor, ours)):
        for kind in order:
            progress(kind)
            samples[kind].append(measure(kind, len(samples[kind])))
    return samples


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "%":
        return f"{value:.0f}%"
    if unit in ("calls", "requests", "clusters"):
        return f"{value:g} {unit}"
    if unit == "s":
        return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "MiB":
        return f"{value:.0f} MiB"
    if unit == "GET/s":
        return f"{value:.0f} GET/s"
    return f"{value:g} {unit}".strip()


def seconds(value: float) -> str:
    """A duration for the floor column."""
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
