"""The drill's report: the runtime's own ``resumed step=`` line is read back, the verdict follows the rows."""

from __future__ import annotations

import json
import subprocess
import sys

from together_clusters.cli.drill.report import (
    DrillReport,
    Outcome,
    Resumed,
    WorkloadReport,
    drill_json,
    drill_text,
    parse_resumed,
)


def runtime_stderr(*steps: int) -> str:
    """What the checkpoint runtime writes on stderr when a pod restores (run in a real process)."""
    calls = "; ".join(f"report_resumed({s}, 'step-{s:08d}')" for s in steps)
    code = f"from together_clusters.components.checkpoint.contract import report_resumed; {calls}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stderr


def test_the_runtimes_resumed_line_is_parsed_and_the_last_one_wins() -> None:
    log = "loading data\n" + runtime_stderr(120, 340) + "epoch 3\n"
    assert parse_resumed(log) == Resumed(340, "step-00000340")
    assert parse_resumed("started fresh\n") is None


def row(outcome: Outcome) -> WorkloadReport:
    return WorkloadReport("Job", "ml", "train", 1, outcome, 12.5, Resumed(340, "step-00000340"), "")


def test_one_workload_not_surviving_makes_the_report_not_ok() -> None:
    good = DrillReport("twin", "n-1", "eviction", (row(Outcome.SURVIVED),))
    bad = DrillReport("twin", "n-1", "eviction", (row(Outcome.SURVIVED), row(Outcome.NOT_REPLACED)))
    assert good.ok and not bad.ok
    assert json.loads(drill_json(bad))["ok"] is False
    assert json.loads(drill_json(good))["workloads"][0]["resumed"] == {
        "step": 340,
        "checkpoint": "step-00000340",
    }
    text = drill_text(good)
    assert "Job/train" in text and "12.5s" in text and "340 (step-00000340)" in text
    assert text.endswith("every workload survived\n")
    assert "no workload had pods on the node" in drill_text(DrillReport("game-day", "n-1", "eviction", ()))
