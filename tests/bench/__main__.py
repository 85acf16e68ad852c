"""``scripts/bench``: measure what the provider, the drift check, the checkpoint runtime and the twin
cost, each against its floor, and write ``results.md`` and ``results.json``.

    scripts/bench                  # the full benchmark (tens of minutes), into bench/
    scripts/bench --quick          # a smoke run: tiny sizes, one repetition, into bench/quick/
    scripts/bench --only 1,2       # some sections only

Sections: 1 engine overhead, 2 API calls per operation, 3 Ready detection lag, 4 checkpoint,
5 emulator, 6 drift, 7 twin, 8 capacity, 9 remediation gate, 10 fleet. A section that cannot run here (no engine, no twin) says "not
available" in the table, with the reason; one that fails says so and the others still run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from . import (
    api_calls,
    capacity,
    checkpoint_speed,
    drift_speed,
    emulator_speed,
    engine_overhead,
    fleet,
    ready_lag,
    remediation_gate,
    twin,
)
from .context import Context, Scale
from .figures import Figure, unavailable
from .machine import describe
from .report import as_json, carried_over, markdown
from .servers import ROOT, Served, counting_emulator
from .stacks import engine_missing

SECTIONS = {
    1: engine_overhead.SECTION,
    2: api_calls.SECTION,
    3: ready_lag.SECTION,
    4: checkpoint_speed.SECTION,
    5: emulator_speed.SECTION,
    6: drift_speed.SECTION,
    7: twin.SECTION,
    8: capacity.SECTION,
    9: remediation_gate.SECTION,
    10: fleet.SECTION,
}
ENGINE_RUNS: dict[int, Callable[[Context, Served], list[Figure]]] = {
    1: engine_overhead.run,
    2: api_calls.run,
    6: drift_speed.run,
}
PLAIN_RUNS: dict[int, Callable[[Context], list[Figure]]] = {
    3: ready_lag.run,
    4: checkpoint_speed.run,
    5: emulator_speed.run,
    7: twin.run,
    8: capacity.run,
    9: remediation_gate.run,
    10: fleet.run,
}


def _guarded(ctx: Context, number: int, measure: Callable[[], list[Figure]]) -> list[Figure]:
    ctx.progress(f"section {SECTIONS[number]}")
    try:
        return measure()
    except Exception as exc:
        ctx.progress(traceback.format_exc())
        return [unavailable(SECTIONS[number], "the whole section", f"it failed: {type(exc).__name__}: {exc}")]


def run(ctx: Context, sections: list[int]) -> list[Figure]:
    """The figures of ``sections``; the engine sections share one counting emulator, at high clock speed."""
    figures: list[Figure] = []
    missing = engine_missing() if any(s in ENGINE_RUNS for s in sections) else None
    emulator = None if missing is not None else counting_emulator(engine_overhead.SPEED)
    try:
        for number in sections:
            if number in PLAIN_RUNS:
                figures += _guarded(ctx, number, partial(PLAIN_RUNS[number], ctx))
            elif emulator is None:
                figures.append(unavailable(SECTIONS[number], "the whole section", str(missing)))
            else:
                figures += _guarded(ctx, number, partial(ENGINE_RUNS[number], ctx, emulator))
    finally:
        if emulator is not None:
            emulator.stop()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, one repetition")
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write (default bench/, quick: bench/quick/)"
    )
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated section numbers (default: all); the other sections' figures already in "
        "the results file are kept, marked with the run that measured them",
    )
    args = parser.parse_args(argv)
    sections = sorted({int(s) for s in args.only.split(",")}) if args.only else sorted(SECTIONS)
    out = args.out or (ROOT / "bench" / ("quick" if args.quick else ""))
    scale = Scale.smoke() if args.quick else Scale.full()
    workdir = Path(tempfile.mkdtemp(prefix="bench-"))
    ctx = Context(scale, workdir)
    machine = describe()
    try:
        figures = [replace(f, run=machine["date"]) for f in run(ctx, sections)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    machines = {machine["date"]: machine}
    previous = out / "results.json"
    if args.only and previous.exists():
        kept, earlier = carried_over(json.loads(previous.read_text()), {SECTIONS[s] for s in sections})
        figures = sorted([*figures, *kept], key=lambda f: int(f.section.split(".")[0]))
        machines = {**earlier, **machines}
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(markdown(figures, machines, args.quick))
    (out / "results.json").write_text(as_json(figures, machines, args.quick))
    ctx.progress(f"wrote {out / 'results.md'} and {out / 'results.json'}")
    print(markdown(figures, machines, args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
