"""The local file backend the project's engine runs on survives a SIGKILL anywhere.

Pulumi's DIY backend writes each checkpoint atomically (gocloud's fileblob writes a temporary file and
renames it), but fileblob also writes a sidecar ``<stack>.json.attrs`` in place: ``os.Create`` truncates it,
then the JSON is written. An engine killed between the two leaves it empty, and from then on every command
on the stack, ``pulumi cancel`` included, fails with ``failed to load checkpoint: EOF`` (the kill campaign
met it in CI, seed 227). The sidecar holds only a content type and an MD5 that Pulumi never reads, so the
project's backends write none (``?metadata=skip``): then a kill has nothing to truncate.

Oracles: the real engine and the files it leaves in the backend's folder.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import _engine

pytestmark = pytest.mark.engine

PROJECT = """\
name: state-backend
runtime: yaml
outputs:
  answer: 42
"""


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "program"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(PROJECT)
    return project


def _checkpoints(state: Path) -> list[Path]:
    return sorted(state.glob(".pulumi/stacks/**/*.json"))


def test_the_engine_writes_no_sidecar_that_a_kill_could_leave_empty(tmp_path: Path) -> None:
    _engine.require_engine()
    project = _project(tmp_path)
    env = _engine.engine_env(tmp_path)
    pulumi = _engine.pulumi_in(project, env)
    pulumi("stack", "init", "dev")
    pulumi("up", *_engine.UP_FLAGS)

    state = tmp_path / ".pulumi-state"
    assert _checkpoints(state), sorted(state.rglob("*"))
    assert sorted(state.rglob("*.attrs")) == []
    assert _engine.stack_outputs(project, env) == {"answer": 42}


def test_an_empty_sidecar_is_what_breaks_a_stack_and_removing_it_mends_it(tmp_path: Path) -> None:
    """Why the option is set, and the recovery for a backend without it (docs/concepts/cluster.md)."""
    _engine.require_engine()
    project = _project(tmp_path)
    state = tmp_path / "sidecar-state"
    state.mkdir()
    env = _engine.engine_env(tmp_path, extra={"PULUMI_BACKEND_URL": state.as_uri()})
    pulumi = _engine.pulumi_in(project, env)
    pulumi("stack", "init", "dev")
    (checkpoint,) = _checkpoints(state)
    sidecar = checkpoint.with_name(checkpoint.name + ".attrs")
    assert sidecar.is_file()

    sidecar.write_bytes(b"")  # what a SIGKILL between fileblob's os.Create and its write leaves
    broken = _engine.run_pulumi(["cancel", "--yes"], cwd=project, env=env)
    assert broken.returncode != 0 and "failed to load checkpoint: EOF" in broken.stderr, _engine.output(broken)

    sidecar.unlink()
    _engine.run_pulumi(["cancel", "--yes"], cwd=project, env=env, check=True)
    pulumi("up", *_engine.UP_FLAGS)
    assert _engine.stack_outputs(project, env) == {"answer": 42}


def test_scripts_pulumi_defaults_to_a_backend_without_the_sidecar(tmp_path: Path) -> None:
    _engine.require_engine()
    env = {k: v for k, v in os.environ.items() if k != "PULUMI_BACKEND_URL"}
    who = subprocess.run(
        [str(_engine.PULUMI), "whoami", "--verbose"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert who.returncode == 0, who.stderr
    (url,) = [line.split(":", 1)[1].strip() for line in who.stdout.splitlines() if line.startswith("Backend URL")]
    assert url.startswith("file://") and url.endswith("?metadata=skip"), who.stdout
