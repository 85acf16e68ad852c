"""The command line where Pulumi and kubectl users look: -s/--stack defaulting to the selected stack,
-C/--cwd, drill's -n/--namespace and --context, --version, plain-text help, one-line errors."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from together_clusters.cli.main import build_parser, main
from together_clusters.cli.workspace import EngineSettings, open_workspace, selected_stack

# Markup that reads as noise in a terminal: RST literals and roles, Markdown bold and code, bullets.
MARKUP = re.compile(r"``|\*\*|`[^`]+`|:(class|func|data|mod|meth):|^\s*- \*\*", re.MULTILINE)


def parsers() -> dict[str, argparse.ArgumentParser]:
    top = build_parser()
    found = {"together-clusters": top}
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update({f"together-clusters {n}": p for n, p in action.choices.items()})
    return found


@pytest.mark.parametrize("name", list(parsers()))
def test_help_is_plain_text(name: str) -> None:
    text = parsers()[name].format_help()
    assert not MARKUP.search(text), f"{name} --help shows markup: {MARKUP.search(text)!r}"


def test_the_templates_help_is_plain_text() -> None:
    from together_clusters.templates.__main__ import build_parser as templates_parser

    text = templates_parser().format_help()
    assert not MARKUP.search(text), text


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["status", "-s", "prod"], "stack", "prod"),
        (["status", "--stack", "prod"], "stack", "prod"),
        (["status"], "stack", None),
        (["drift", "-s", "a", "-s", "b"], "stacks", ["a", "b"]),
        (["drift"], "stacks", None),
        (["drift", "-C", "/tmp/p"], "cwd", Path("/tmp/p")),
        (["status", "--cwd", "/tmp/p"], "cwd", Path("/tmp/p")),
        (["drill", "-n", "team-a"], "namespace", "team-a"),
        (["drill", "--namespace", "team-a"], "namespace", "team-a"),
        (["drill", "--context", "prod-east"], "context", "prod-east"),
        (["drill", "--dry-run"], "dry_run", True),
        (["drill", "--yes"], "yes", True),
        (["drill", "--twin", "http://x"], "termination", None),
    ],
)
def test_flags_as_pulumi_and_kubectl_spell_them(argv: list[str], dest: str, value: object) -> None:
    assert getattr(build_parser().parse_args(argv), dest) == value


def test_version_prints_the_distribution_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"together-clusters {metadata.version('together-gpu-clusters')}"


@pytest.mark.parametrize(
    "argv",
    [["drift", "--jobs", "0"], ["status", "--price-per-gpu-hour", "-1"], ["drill", "--nope"], ["nope"]],
)
def test_bad_arguments_are_one_line_exit_1(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("together-clusters") and "error:" in line, line


def test_the_module_entry_point_errors_on_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "together_clusters.cli", "drill", "--grace", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_no_selected_stack_is_a_one_line_error_naming_the_flag() -> None:
    from together_clusters.errors import EngineError

    workspace = SimpleNamespace(work_dir="/p", stack=lambda: None)
    with pytest.raises(EngineError) as refused:
        selected_stack(workspace)  # type: ignore[arg-type]
    assert (
        str(refused.value)
        == "no stack is selected in /p: give -s/--stack NAME, or run pulumi stack select NAME"
    )


@pytest.mark.engine
def test_without_a_stack_status_and_drift_use_the_selected_one(tmp_path, monkeypatch) -> None:
    from tests import _engine

    _engine.require_engine()
    project = tmp_path / "p"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: p\nruntime: python\n")
    env = _engine.engine_env(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    pulumi = _engine.ROOT / ".engine" / "bin" / "pulumi"
    subprocess.run(
        [str(pulumi), "stack", "init", "first"], cwd=project, env=env, check=True, capture_output=True
    )
    subprocess.run(
        [str(pulumi), "stack", "init", "chosen"], cwd=project, env=env, check=True, capture_output=True
    )
    workspace = open_workspace(EngineSettings(project_dir=project, pulumi=pulumi))
    assert selected_stack(workspace) == "chosen"


def test_the_emulators_help_is_plain_text() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "together_clusters.emulator", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert not MARKUP.search(done.stdout), done.stdout
