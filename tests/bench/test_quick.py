"""The benchmark still works: ``scripts/bench --quick`` runs every section once, at tiny sizes.

Benchmarks are not tests: nothing here looks at a figure's value or verdict (machines are noisy).
It checks that every section ran to the end, that the results are written as documented, and that no
operation failed (a checkpoint larger than the memory cap must still save and restore under it).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests import _engine

from .__main__ import SECTIONS

pytestmark = pytest.mark.engine


def test_quick_run_writes_every_section(tmp_path: Path) -> None:
    _engine.require_engine()
    proc = subprocess.run(
        [str(_engine.ROOT / "scripts" / "bench"), "--quick", "--out", str(tmp_path)],
        cwd=_engine.ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]

    results = json.loads((tmp_path / "results.json").read_text())
    assert results["quick"] is True
    (machine,) = results["machines"].values()
    assert machine["cpus"] >= 1
    figures = results["figures"]
    assert {f["section"] for f in figures} == set(SECTIONS.values())
    failed = [f for f in figures if "it failed" in f["note"]]
    assert failed == [], failed
    # Not a speed: a checkpoint larger than the process's memory cap saves and restores under it.
    out_of_memory = [f for f in figures if f["failed"]]
    assert out_of_memory == [], out_of_memory
    for figure in figures:
        if figure["verdict"] in ("met", "missed", "no goal"):
            assert isinstance(figure["value"], int | float), figure
        else:  # "not available" always says why
            assert figure["value"] is None and figure["note"].startswith("not available: "), figure

    table = (tmp_path / "results.md").read_text()
    assert "| figure | value | floor | goal | verdict | notes |" in table
    for figure in figures:
        assert figure["name"].replace("|", "\\|") in table
