"""examples/ci/drift.yml stays runnable: every option it gives `together-clusters drift` exists, and its
exit-code handling covers every code the command can return."""

from __future__ import annotations

import re

import yaml

from tests import _engine
from together_clusters.cli.exit_codes import ExitCode
from together_clusters.cli.main import build_parser

WORKFLOW = _engine.ROOT / "examples" / "ci" / "drift.yml"


def _steps() -> list[dict]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_every_drift_option_the_workflow_uses_exists():
    [check] = [s for s in _steps() if "together-clusters drift" in s.get("run", "")]
    used = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", check["run"]))
    drift = build_parser()._subparsers._group_actions[0].choices["drift"]  # type: ignore[union-attr]
    known = {flag for action in drift._actions for flag in action.option_strings}
    assert used >= {"--all-stacks", "--stack", "--fail-on-pending", "--junit", "--markdown", "--json"}
    assert used <= known, used - known


def test_the_last_step_has_a_message_for_every_exit_code():
    [last] = [s for s in _steps() if "steps.drift.outputs.code" in s.get("run", "")]
    handled = {int(code) for code in re.findall(r"^\s*(\d)\)", last["run"], re.M)}
    assert handled == {ExitCode.OK, ExitCode.DRIFT, ExitCode.PENDING}
    assert "*)" in last["run"]  # 1 and anything else: the check could not run
