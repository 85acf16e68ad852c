"""End-to-end smoke test of the real Pulumi engine (scripts/pulumi), offline, on a throwaway stack.

One Python dynamic resource (tests/engine/smoke_provider.py: a file on disk) and one Kubernetes ConfigMap
rendered to YAML by ``k8s.Provider(render_yaml_to_directory=...)``: ``up`` creates both, a second
``preview --expect-no-changes`` passes, ``destroy`` removes both.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests import _engine

pytestmark = pytest.mark.engine

PROGRAM = """\
import pulumi
import pulumi_kubernetes as k8s

from tests.engine.smoke_provider import SmokeFile

config = pulumi.Config()
content = config.get("markerContent") or "hello from the engine smoke test"
marker = SmokeFile("marker", path=config.require("markerPath"), content=content)

render = k8s.Provider("render", render_yaml_to_directory=config.require("renderDir"))
config_map = k8s.core.v1.ConfigMap(
    "smoke",
    metadata={"name": "engine-smoke", "namespace": "default"},
    data={"greeting": "hello"},
    opts=pulumi.ResourceOptions(provider=render),
)

pulumi.export("markerPath", marker.path)
pulumi.export("configMapName", config_map.metadata["name"])
"""


def _rendered(render_dir: Path) -> list[Path]:
    return sorted(p for p in render_dir.rglob("*") if p.is_file() and p.suffix in {".yaml", ".yml", ".json"})


def test_up_preview_destroy(tmp_path: Path) -> None:
    _engine.require_engine()

    project = _engine.write_project(tmp_path / "program", "engine-smoke", PROGRAM)
    env = _engine.engine_env(tmp_path, pythonpath=[_engine.ROOT])
    marker = tmp_path / "marker.txt"
    render_dir = tmp_path / "rendered"

    pulumi = _engine.pulumi_in(project, env)

    pulumi("stack", "init", "smoke")
    pulumi("config", "set", "markerPath", str(marker))
    pulumi("config", "set", "renderDir", str(render_dir))

    up = pulumi("up", *_engine.UP_FLAGS)
    assert marker.read_text() == "hello from the engine smoke test", _engine.output(up)
    files = _rendered(render_dir)
    assert len(files) == 1, (files, _engine.output(up))
    manifest = yaml.safe_load(files[0].read_text())  # rendered as YAML; a JSON file would parse too
    assert manifest["kind"] == "ConfigMap"
    assert manifest["metadata"]["name"] == "engine-smoke"
    assert manifest["data"] == {"greeting": "hello"}
    assert _engine.stack_outputs(project, env) == {"markerPath": str(marker), "configMapName": "engine-smoke"}

    types = sorted(r["type"] for r in _engine.stack_resources(project, env))
    assert "pulumi-python:dynamic:Resource" in types, types
    assert "kubernetes:core/v1:ConfigMap" in types, types

    preview = pulumi("preview", "--expect-no-changes", *_engine.PREVIEW_FLAGS, check=False)
    assert preview.returncode == 0, _engine.output(preview)

    # A proposed change makes --expect-no-changes exit with its own code, not the generic error code.
    pulumi("config", "set", "markerContent", "changed")
    changed = pulumi("preview", "--expect-no-changes", *_engine.PREVIEW_FLAGS, check=False)
    assert changed.returncode == _engine.EXIT_CHANGES_PROPOSED, _engine.output(changed)
    assert marker.read_text() == "hello from the engine smoke test"  # preview changed nothing

    destroy = pulumi("destroy", *_engine.UP_FLAGS)
    assert not marker.exists(), _engine.output(destroy)
    assert _rendered(render_dir) == [], _engine.output(destroy)
    left = [r["type"] for r in _engine.stack_resources(project, env) if r["type"] != "pulumi:pulumi:Stack"]
    assert left == [], left

    pulumi("stack", "rm", "--yes", "smoke")
