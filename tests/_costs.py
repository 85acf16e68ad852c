"""What the proof costs: a table at the end of every run, and the same data as JSON.

``scripts/test`` (and so ``.ci/run``) records each set-up step (pip, the engine's Go builds, each twin binary),
lint and type-check in ``.costs/steps.tsv`` (``scripts/costs.sh``); this plugin adds the suite: wall time,
items and summed test time per directory and per tier, the 15 slowest tests, and how many emulators, control
planes and Pulumi stacks the tests brought up. It prints the table before pytest's closing line and writes
``.costs/latest.json`` (and appends it to ``.costs/history.jsonl``) so that two runs can be compared
(``python -m tests.costs_report --compare A B``).

Bring-ups are counted where they happen, whatever the test's style: an emulator when one starts serving
(in this process, ``RunningEmulator._start``, or as a subprocess), a control plane when the twin makes one
(``ControlPlane``), a Pulumi stack when ``pulumi stack init`` (or ``stack select --create``) is spawned.
Under pytest-xdist each worker counts its own and hands them to the controller with its output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests._ordering import file_seconds, path_of, reorder

ROOT = Path(__file__).resolve().parents[1]
COSTS_DIR = ROOT / ".costs"
LATEST_FILE = COSTS_DIR / "latest.json"
HISTORY_FILE = COSTS_DIR / "history.jsonl"
SLOWEST = 15

#: What each kind of bring-up is called in the table.
EMULATORS = "emulators"
CONTROL_PLANES = "control planes"
STACKS = "pulumi stacks"
PULUMI_UPS = "pulumi ups"
BRING_UPS = (EMULATORS, CONTROL_PLANES, STACKS, PULUMI_UPS)

_WORKER_KEY = "together_costs_bring_ups"
_TIER_PROPERTY = "tier"


def tier_of(item: pytest.Item) -> str:
    """The tier a test belongs to: ``twin`` (needs the Kubernetes twin), ``engine`` (the real Pulumi engine,
    no twin), else ``quick`` (what ``scripts/test --quick`` runs)."""
    if item.get_closest_marker("twin") is not None:
        return "twin"
    if item.get_closest_marker("engine") is not None:
        return "engine"
    return "quick"


def directory_of(nodeid: str) -> str:
    """``tests/twin/test_x.py::test_y`` -> ``tests/twin``."""
    path = path_of(nodeid)
    return path.rsplit("/", 1)[0] if "/" in path else path


# ---- counting bring-ups (in every process that runs tests) ------------------------------------------------
class BringUps:
    """Counts of what the tests brought up in this process, by kind."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._undo: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        """Wrap the places where an emulator, a control plane or a stack is brought up."""
        from together_clusters.emulator.kubernetes.controlplane import ControlPlane
        from together_clusters.emulator.server import RunningEmulator

        self._wrap(RunningEmulator, "_start", EMULATORS)
        self._wrap(ControlPlane, "__init__", CONTROL_PLANES)
        counts = self.counts
        original_popen_init = subprocess.Popen.__init__

        def popen_init(popen: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
            for kind in spawned(args):
                counts[kind] += 1
            original_popen_init(popen, args, *rest, **kwargs)

        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        self._undo.append((subprocess.Popen, "__init__", original_popen_init))

    def _wrap(self, owner: type, name: str, kind: str) -> None:
        original = getattr(owner, name)
        counts = self.counts

        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[kind] += 1
            return original(*args, **kwargs)

        setattr(owner, name, counted)
        self._undo.append((owner, name, original))

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()


def spawned(args: Any) -> list[str]:
    """The bring-ups a spawned command stands for: ``pulumi stack init`` / ``stack select --create`` is a
    stack, ``pulumi up`` an up, ``python -m together_clusters.emulator`` an emulator."""
    if isinstance(args, str | bytes | os.PathLike):
        return []
    words = [os.fspath(a) if not isinstance(a, bytes) else a.decode(errors="replace") for a in args]
    if not words:
        return []
    program = Path(words[0]).name
    kinds: list[str] = []
    if program == "pulumi":
        verbs = [w for w in words[1:] if not w.startswith("-")]
        if verbs[:2] == ["stack", "init"] or (verbs[:2] == ["stack", "select"] and "--create" in words):
            kinds.append(STACKS)
        elif verbs[:1] == ["up"]:
            kinds.append(PULUMI_UPS)
    elif "together_clusters.emulator" in words and "-m" in words:
        kinds.append(EMULATORS)
    return kinds


# ---- the run's data (on the controller, or the only process) ---------------------------------------------
@dataclass
class TestCost:
    nodeid: str
    tier: str
    seconds: float = 0.0
    outcome: str = "passed"


@dataclass
class SuiteCosts:
    started: float = field(default_factory=time.monotonic)
    tests: dict[str, TestCost] = field(default_factory=dict)
    bring_ups: Counter[str] = field(default_factory=Counter)
    workers: int = 0

    def add(self, report: pytest.TestReport) -> None:
        tier = dict(report.user_properties).get(_TIER_PROPERTY, "quick")
        cost = self.tests.setdefault(report.nodeid, TestCost(report.nodeid, str(tier)))
        cost.seconds += report.duration
        if report.failed:
            cost.outcome = "failed" if report.when == "call" else "error"
        elif report.skipped and cost.outcome == "passed":
            cost.outcome = "skipped"

    def summary(self) -> dict[str, Any]:
        wall = time.monotonic() - self.started
        by_directory: dict[str, dict[str, Any]] = {}
        by_tier: dict[str, dict[str, Any]] = {}
        for cost in self.tests.values():
            for table, key in ((by_directory, directory_of(cost.nodeid)), (by_tier, cost.tier)):
                row = table.setdefault(key, {"items": 0, "test_seconds": 0.0, "outcomes": Counter()})
                row["items"] += 1
                row["test_seconds"] += cost.seconds
                row["outcomes"][cost.outcome] += 1
        for table in (by_directory, by_tier):
            for row in table.values():
                row["test_seconds"] = round(row["test_seconds"], 1)
                row["outcomes"] = dict(row["outcomes"])
        slowest = sorted(self.tests.values(), key=lambda c: c.seconds, reverse=True)[:SLOWEST]
        return {
            "wall_seconds": round(wall, 1),
            "workers": self.workers,
            "items": len(self.tests),
            "directories": dict(sorted(by_directory.items())),
            "tiers": dict(sorted(by_tier.items())),
            "slowest": [{"nodeid": c.nodeid, "seconds": round(c.seconds, 1)} for c in slowest],
            "bring_ups": {kind: self.bring_ups.get(kind, 0) for kind in BRING_UPS},
            "files": file_seconds((c.nodeid, c.seconds) for c in self.tests.values()),
        }


def read_steps(path: Path | None = None) -> list[dict[str, Any]]:
    """The steps ``scripts/costs.sh`` recorded for this run (``$COSTS_STEPS``, set by ``scripts/test``): name,
    seconds, and a note (``built``, ``up to date``, ...). A pytest run of its own has none."""
    if path is None:
        recorded = os.environ.get("COSTS_STEPS")
        if not recorded:
            return []
        path = Path(recorded)
    if not path.exists():
        return []
    steps = []
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            steps.append({"step": parts[0], "seconds": float(parts[1]), "note": "\t".join(parts[2:])})
    return steps


def minutes(seconds: float) -> str:
    """``83.6`` -> ``1:24``; under a minute, ``12.3s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def render(costs: dict[str, Any]) -> Iterator[str]:
    """The table printed at the end of a run."""
    steps = costs.get("steps", [])
    suite = costs["suite"]
    yield "set-up, lint and type-check (this run)"
    for step in steps:
        yield f"  {step['step']:<42} {minutes(step['seconds']):>8}  {step['note']}"
    if not steps:
        yield "  (none recorded: run through scripts/test to time them)"
    yield f"suite: {suite['items']} items, wall {minutes(suite['wall_seconds'])} on {suite['workers'] or 1} worker(s)"
    yield f"  {'tier':<42} {'items':>6} {'test time':>10}"
    for name, row in suite["tiers"].items():
        yield f"  {name:<42} {row['items']:>6} {minutes(row['test_seconds']):>10}"
    yield f"  {'directory':<42} {'items':>6} {'test time':>10}"
    for name, row in suite["directories"].items():
        yield f"  {name:<42} {row['items']:>6} {minutes(row['test_seconds']):>10}"
    yield "  brought up: " + ", ".join(f"{n} {kind}" for kind, n in suite["bring_ups"].items())
    yield f"  the {len(suite['slowest'])} slowest tests"
    for test in suite["slowest"]:
        yield f"    {minutes(test['seconds']):>8}  {test['nodeid']}"
    total = sum(s["seconds"] for s in steps) + suite["wall_seconds"]
    yield f"total: {minutes(total)} (set-up steps + suite wall time); JSON in {LATEST_FILE.relative_to(ROOT)}"


class CostsPlugin:
    """Registered by ``tests/conftest.py`` in every pytest process."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.bring_ups = BringUps()
        self.suite = SuiteCosts()
        self.is_worker = hasattr(config, "workerinput")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.bring_ups.install()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        reorder(items, tier_of)
        # Under xdist the controller collects nothing: the tier travels with each report instead.
        for item in items:
            item.user_properties.append((_TIER_PROPERTY, tier_of(item)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", {}) or {}
        self.suite.bring_ups.update(output.get(_WORKER_KEY, {}))
        self.suite.workers += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.is_worker:
            self.suite.add(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.bring_ups.uninstall()
        if self.is_worker:
            self.config.workeroutput[_WORKER_KEY] = dict(self.bring_ups.counts)  # type: ignore[attr-defined]
        else:
            self.suite.bring_ups.update(self.bring_ups.counts)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or not self.suite.tests:
            return
        costs = {
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "argv": sys.argv[1:],
            "steps": read_steps(),
            "suite": self.suite.summary(),
        }
        try:
            COSTS_DIR.mkdir(exist_ok=True)
            LATEST_FILE.write_text(json.dumps(costs, indent=2) + "\n")
            with HISTORY_FILE.open("a") as history:
                history.write(json.dumps(costs) + "\n")
        except OSError as exc:  # a read-only checkout still gets the table
            terminalreporter.write_line(f"costs: not written ({exc})")
        terminalreporter.section("what this run cost")
        for line in render(costs):
            terminalreporter.write_line(line)
