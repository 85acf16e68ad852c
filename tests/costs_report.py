"""Reading the costs ``scripts/test`` writes (``.costs/latest.json``, ``.costs/history.jsonl``).

python -m tests.costs_report                   the latest run's table
python -m tests.costs_report --compare A B     two runs' JSON side by side (steps, tiers, bring-ups)
python -m tests.costs_report --markdown        the latest run as the Markdown table of docs/development.md
python -m tests.costs_report --write-durations tests/durations.json from the latest full run (the order
                                               tests/_ordering.py gives the workers)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests._costs import LATEST_FILE, minutes, render
from tests._ordering import DURATIONS


def load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def compare(before: dict[str, Any], after: dict[str, Any]) -> Iterator[str]:
    """Each step, tier and bring-up count of two runs, with the second as a ratio of the first."""

    def row(name: str, a: float | None, b: float | None, as_time: bool = True) -> str:
        shown = [minutes(v) if as_time and v is not None else ("-" if v is None else str(v)) for v in (a, b)]
        ratio = f"{b / a:.2f}x" if a and b is not None else ""
        return f"  {name:<44} {shown[0]:>9} {shown[1]:>9} {ratio:>7}"

    yield f"  {'':<44} {'before':>9} {'after':>9}"
    steps_a = {s["step"]: s["seconds"] for s in before.get("steps", [])}
    steps_b = {s["step"]: s["seconds"] for s in after.get("steps", [])}
    for name in dict.fromkeys([*steps_a, *steps_b]):
        yield row(name, steps_a.get(name), steps_b.get(name))
    suite_a, suite_b = before["suite"], after["suite"]
    yield row("suite wall time", suite_a["wall_seconds"], suite_b["wall_seconds"])
    for tier in dict.fromkeys([*suite_a["tiers"], *suite_b["tiers"]]):
        a, b = suite_a["tiers"].get(tier), suite_b["tiers"].get(tier)
        yield row(f"tier {tier}: test time", a and a["test_seconds"], b and b["test_seconds"])
        yield row(f"tier {tier}: items", a and a["items"], b and b["items"], as_time=False)
    for kind in dict.fromkeys([*suite_a["bring_ups"], *suite_b["bring_ups"]]):
        yield row(
            f"brought up: {kind}", suite_a["bring_ups"].get(kind), suite_b["bring_ups"].get(kind), False
        )


def markdown(costs: dict[str, Any]) -> Iterator[str]:
    """The latest run as the tables docs/development.md shows."""
    yield "| step | time | note |"
    yield "| --- | ---: | --- |"
    for step in costs.get("steps", []):
        yield f"| {step['step']} | {minutes(step['seconds'])} | {step['note']} |"
    suite = costs["suite"]
    yield f"| suite ({suite['workers'] or 1} workers, wall) | {minutes(suite['wall_seconds'])} | {suite['items']} items |"
    yield ""
    yield "| tier | items | test time (summed over workers) |"
    yield "| --- | ---: | ---: |"
    for tier, row in suite["tiers"].items():
        yield f"| {tier} | {row['items']} | {minutes(row['test_seconds'])} |"
    yield ""
    yield "Brought up: " + ", ".join(f"{n} {kind}" for kind, n in suite["bring_ups"].items()) + "."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.costs_report", description=__doc__.splitlines()[0])
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--write-durations", action="store_true")
    args = parser.parse_args(argv)
    if args.compare:
        print("\n".join(compare(load(args.compare[0]), load(args.compare[1]))))
        return 0
    if not LATEST_FILE.exists():
        print(f"costs_report: no {LATEST_FILE}: run scripts/test first", file=sys.stderr)
        return 1
    latest = load(LATEST_FILE)
    if args.write_durations:
        DURATIONS.write_text(json.dumps(latest["suite"]["files"], indent=1) + "\n")
        print(f"costs_report: wrote {len(latest['suite']['files'])} files' durations to {DURATIONS}")
    elif args.markdown:
        print("\n".join(markdown(latest)))
    else:
        print("\n".join(render(latest)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
