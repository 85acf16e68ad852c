"""The fleet's reports: the worst exit code, JSON, JUnit XML (parsed as CI tools parse it) and Markdown."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from together_clusters.cli.drift.classify import (
    DriftReport,
    Missing,
    PendingChange,
    Shortfall,
    SpecDrift,
    classify,
)
from together_clusters.cli.drift.junit import junit_xml
from together_clusters.cli.drift.markdown import markdown_summary
from together_clusters.cli.drift.report import drift_text, fleet_json, fleet_text
from together_clusters.cli.drift.results import StackResult, fleet_exit_code, worst_exit_code
from together_clusters.cli.exit_codes import ExitCode

CLUSTER = "together_clusters:Cluster"
IN_SYNC = StackResult("dev", DriftReport(shortfall=[Shortfall("gpus", "c-1", 8, 0, 8)]), seconds=1.5)
DRIFTED = StackResult(
    "prod",
    DriftReport(
        drift=[SpecDrift("train", CLUSTER, "urn:x::train", "num_preemptible_gpus", 8, 16, 8)],
        missing=[Missing("infer", CLUSTER, "urn:x::infer", "c-9")],
    ),
    seconds=2.0,
)
PENDING = StackResult(
    "staging",
    DriftReport(pending=[PendingChange("train", CLUSTER, "urn:y::train", "update", "num_gpus", 8, 16)]),
)
BROKEN = StackResult("qa", None, "`pulumi preview --refresh` of stack qa failed: no stack named 'qa' found")


@pytest.mark.parametrize(
    ("codes", "worst"),
    [
        ([], ExitCode.OK),
        ([ExitCode.OK, ExitCode.PENDING], ExitCode.PENDING),
        ([ExitCode.PENDING, ExitCode.DRIFT, ExitCode.OK], ExitCode.DRIFT),
        ([ExitCode.DRIFT, ExitCode.ERROR], ExitCode.ERROR),
    ],
)
def test_worst_exit_code_ranks_error_over_drift_over_pending(codes, worst):
    assert worst_exit_code(codes) == worst


def test_pending_fails_the_fleet_only_on_request():
    assert fleet_exit_code([IN_SYNC, PENDING], fail_on_pending=False) == ExitCode.OK
    assert fleet_exit_code([IN_SYNC, PENDING], fail_on_pending=True) == ExitCode.PENDING


def test_json_has_one_entry_per_stack_and_the_worst_exit_code():
    data = json.loads(fleet_json([IN_SYNC, DRIFTED, PENDING, BROKEN], fail_on_pending=False))
    assert data["exit_code"] == ExitCode.ERROR
    assert data["summary"] == {
        "in_sync": ["dev"],
        "drift": ["prod"],
        "changes_pending": ["staging"],
        "error": ["qa"],
    }
    by_stack = {s["stack"]: s for s in data["stacks"]}
    assert [(d["resource"], d["field"], d["code"], d["live"]) for d in by_stack["prod"]["drift"]] == [
        ("train", "num_preemptible_gpus", 8, 16)
    ]
    assert by_stack["prod"]["missing"][0]["id"] == "c-9"
    assert (
        by_stack["staging"]["exit_code"] == ExitCode.OK and by_stack["staging"]["pending"][0]["code"] == 16
    )
    assert by_stack["qa"] == {
        "stack": "qa",
        "result": "error",
        "seconds": 0.0,
        "exit_code": ExitCode.ERROR,
        "error": BROKEN.error,
    }
    assert by_stack["dev"]["info"]["capacity_shortfall"][0]["shortfall_gpus"] == 8


def test_junit_marks_drift_as_failure_errors_as_error_and_pending_per_flag():
    root = ET.fromstring(junit_xml([IN_SYNC, DRIFTED, PENDING, BROKEN], fail_on_pending=False))
    [suite] = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "1")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"stack dev", "stack prod", "stack staging", "stack qa"}
    failure = cases["stack prod"].find("failure")
    assert failure is not None and failure.get("type") == "drift"
    assert "train.num_preemptible_gpus: code 8, live 16" in (failure.get("message") or "")
    assert "infer (c-9) missing" in (failure.get("message") or "")
    error = cases["stack qa"].find("error")
    assert error is not None and "no stack named 'qa' found" in (error.get("message") or "")
    assert cases["stack staging"].find("failure") is None
    assert "num_gpus" in (cases["stack staging"].findtext("system-out") or "")

    strict = ET.fromstring(junit_xml([PENDING], fail_on_pending=True))
    failure = strict.find("testsuite/testcase/failure")
    assert failure is not None and failure.get("type") == "changes-pending"


def test_markdown_names_the_drifted_stack_and_its_fields():
    text = markdown_summary([IN_SYNC, DRIFTED, PENDING], fail_on_pending=False)
    assert text.startswith("## Drift check: ❌ drift in 1 stack of 3 (exit 2)\n")
    assert "| prod | ❌ drift | 1 | 1 | 0 |" in text
    assert "| dev | ✅ in sync | 0 | 0 | 0 |" in text
    assert "| train | together_clusters:Cluster | num_preemptible_gpus | 8 | 16 |" in text
    assert "| train | update | num_gpus | 8 | 16 |" in text
    assert "capacity shortfall: gpus has 0 of 8 preemptible GPUs allocated" in text


def test_text_summary_lists_every_stack_with_its_result():
    text = fleet_text([IN_SYNC, DRIFTED, BROKEN], fail_on_pending=False)
    assert "Stack prod: DRIFT FOUND (1 changed field, 1 missing resource)." in text
    assert "Stack qa: ERROR: " in text
    summary = text[text.index("Summary of 3 stacks (exit 1):") :].splitlines()
    assert summary[3].split()[:2] == ["dev", "in"] and summary[4].split()[:2] == ["prod", "drift"]


def test_stack_text_names_resource_field_and_values_and_the_information():
    from tests.cli.test_classify import AS_DEPLOYED, cluster, export, inputs, step

    live = step("update", inputs(num_preemptible_gpus=16), inputs(), desired_preemptible_gpus=16,
                allocated_preemptible_gpus=8, recent_preemptions=1)  # fmt: skip
    text = drift_text("dev", classify(export(cluster()), [live], AS_DEPLOYED))
    assert text.startswith("Stack dev: DRIFT FOUND (1 changed field).")
    row = next(line for line in text.splitlines() if "num_preemptible_gpus" in line)
    assert row.split() == ["quickstart", "together_clusters:Cluster", "num_preemptible_gpus", "8", "16"]
    assert "capacity shortfall: quickstart has 8 of 16" in text
    assert "preemption churn: quickstart had 1 preemption since the state was written" in text
    synced = drift_text("dev", classify(export(cluster()), [step("same", inputs(), inputs())], AS_DEPLOYED))
    assert synced == "Stack dev: in sync (no drift).\n"
