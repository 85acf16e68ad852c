"""The suite's order: the test files expected to take longest first, so that the pytest-xdist workers
(``scripts/test`` runs ``--dist loadfile --no-loadscope-reorder``) finish together instead of one worker
starting a long twin module as the others run out of work (longest processing time first).

What a file costs comes from ``tests/durations.json`` (seconds per file, written from a full run's costs by
``python -m tests.costs_report --write-durations``); a file it does not know yet is guessed from its tier.
The order changes which worker runs a file, never what a test does: each file still runs its tests in the
order they are written, and every worker sorts the same collection the same way (xdist checks it does).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"

#: The guess, in seconds, for a file ``durations.json`` does not know yet, by the marker of its first test.
GUESS_BY_TIER = {"twin": 120.0, "engine": 60.0, "quick": 2.0}


def known_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(name): float(seconds) for name, seconds in loaded.items()}


def path_of(nodeid: str) -> str:
    """``tests/twin/test_x.py::test_y[a]`` -> ``tests/twin/test_x.py``."""
    return nodeid.split("::", 1)[0]


def file_of(item: pytest.Item) -> str:
    return path_of(item.nodeid)


def longest_first(
    items: list[pytest.Item], tier_of: Callable[[pytest.Item], str], durations: dict[str, float]
) -> list[pytest.Item]:
    """``items`` grouped by file, the files in decreasing expected cost (ties keep the collection order)."""
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(file_of(item), []).append(item)

    def expected(path: str) -> float:
        if path in durations:
            return durations[path]
        first = by_file[path][0]
        return GUESS_BY_TIER.get(tier_of(first), GUESS_BY_TIER["quick"])

    order = sorted(by_file, key=lambda path: -expected(path))  # sorted() is stable: ties keep their order
    return [item for path in order for item in by_file[path]]


def reorder(items: list[pytest.Item], tier_of: Callable[[pytest.Item], str]) -> None:
    """Reorder ``items`` in place (pytest_collection_modifyitems)."""
    items[:] = longest_first(items, tier_of, known_durations())


def file_seconds(tests: Iterable[tuple[str, float]]) -> dict[str, float]:
    """(nodeid, seconds) of each test -> seconds per file, rounded, largest first."""
    totals: dict[str, float] = {}
    for nodeid, seconds in tests:
        path = path_of(nodeid)
        totals[path] = totals.get(path, 0.0) + seconds
    return {path: round(seconds, 1) for path, seconds in sorted(totals.items(), key=lambda kv: -kv[1])}
