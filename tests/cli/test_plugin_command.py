"""``together-clusters plugin install`` without the engine: the launcher it installs names this interpreter, and a
missing pulumi is one line naming the fix. (The install into a plugin cache, and a program finding the plugin
there, is tests/provider/test_engine_native.py.)"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from together_clusters.cli.main import main
from together_clusters.cli.plugin import command


def test_the_installed_launcher_runs_the_plugin_with_the_interpreter_that_has_the_package(
    tmp_path: Path,
) -> None:
    python = "/opt/my env/bin/python"
    text = command.launcher_text(python)
    assert f"installed_python={shlex.quote(python)}" in text.splitlines()
    launcher = tmp_path / command.LAUNCHER
    launcher.write_text(text)
    # The shell reads it: TOGETHER_PLUGIN_PYTHON=echo shows the command it would run.
    ran = subprocess.run(
        ["sh", str(launcher), "127.0.0.1:1"],
        env={"TOGETHER_PLUGIN_PYTHON": "echo", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.split() == ["-u", "-m", "together_clusters.provider.native", "127.0.0.1:1"]


def test_the_shipped_launcher_falls_back_to_the_projects_virtualenv(tmp_path: Path) -> None:
    launcher = command.PLUGIN_DIR / command.LAUNCHER
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "python"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    ran = subprocess.run(
        [str(launcher), "127.0.0.1:1"],
        env={"PULUMI_RUNTIME_VIRTUALENV": str(venv), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.split() == ["-u", "-m", "together_clusters.provider.native", "127.0.0.1:1"]


def test_a_pulumi_that_fails_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pulumi = tmp_path / "pulumi"
    pulumi.write_text("#!/bin/sh\necho 'error: no such plugin dir' >&2\nexit 3\n")
    pulumi.chmod(0o755)
    assert main(["plugin", "install", "--pulumi", str(pulumi)]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        "together-clusters plugin: error: pulumi plugin install failed (exit 3): error: no such plugin dir"
    )


def test_the_command_runs_pulumi_plugin_install_with_the_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pulumi = tmp_path / "pulumi"
    seen = tmp_path / "seen"
    pulumi.write_text(f'#!/bin/sh\necho "$@" > {seen}\ncp "$7/{command.LAUNCHER}" {tmp_path}/copied\n')
    pulumi.chmod(0o755)
    assert main(["plugin", "install", "--pulumi", str(pulumi)]) == 0
    args = seen.read_text().split()
    assert args[:5] == ["plugin", "install", "resource", "together", command.version()]
    assert args[5] == "--file" and args[7] == "--reinstall"
    assert f"installed_python={shlex.quote(sys.executable)}" in (tmp_path / "copied").read_text()
    assert "installed the Pulumi plugin together" in capsys.readouterr().out
