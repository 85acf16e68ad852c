"""A stack written by an earlier release still refreshes and destroys: the stability promise of
``provider/resource.py`` (the pickled ``together_clusters.provider.resource.ClusterProvider`` and the type
``pulumi-python:dynamic/together_clusters:Cluster``) checked with the real engine.

The fixture ``old_state/cluster-747a1a0.json`` is a ``pulumi stack export`` written by a real ``pulumi up``
at commit 747a1a0 (recipe: ``old_state/record.py``). It is imported into a fresh stack whose cluster lives
in a fresh emulator: the official SDK re-creates the cluster there with the recorded inputs, and the state
is pointed at it (its id and the recorded ``api_endpoint`` only; the type, the pickled provider and the
inputs are imported as recorded). A rename of the provider module or class, or of the type token, makes
the engine fail to load the provider, and this test with it.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import together

from tests import _engine
from tests.provider.old_state import record
from together_clusters.emulator.server import start_emulator

pytestmark = pytest.mark.engine

FIXTURE = Path(__file__).parent / "old_state" / "cluster-747a1a0.json"
CLUSTER_TYPE = "pulumi-python:dynamic/together_clusters:Cluster"
PROVIDER_PATH = (b"together_clusters.provider.resource", b"ClusterProvider")


def _cluster_resource(deployment: dict[str, Any]) -> dict[str, Any]:
    [cluster] = [r for r in deployment["deployment"]["resources"] if r["type"] == CLUSTER_TYPE]
    return cluster


def test_fixture_is_a_state_of_the_stable_names():
    """What the fixture holds (a guard against an edited fixture; the engine test below is the check)."""
    cluster = _cluster_resource(json.loads(FIXTURE.read_text()))
    pickled = base64.b64decode(cluster["inputs"]["__provider"])
    assert all(name in pickled for name in PROVIDER_PATH)
    assert cluster["outputs"]["status"] == "Ready"
    assert record.API_KEY not in FIXTURE.read_text()


def test_state_of_747a1a0_refreshes_and_destroys(tmp_path):
    _engine.require_engine()
    recorded = json.loads(FIXTURE.read_text())
    old = _cluster_resource(recorded)
    inputs = old["inputs"]
    with start_emulator(speed=600) as emu:
        sdk = together.Together(api_key=record.API_KEY, base_url=emu.base_url, max_retries=2)
        try:
            created = sdk.clusters.create(
                cluster_name=inputs["cluster_name"],
                region=inputs["region"],
                gpu_type=inputs["gpu_type"],
                num_gpus=inputs["num_gpus"],
                num_preemptible_gpus=inputs["num_preemptible_gpus"],
                billing_type=inputs["billing_type"],
                cluster_type=inputs["cluster_type"],
                nvidia_version_id=inputs["nvidia_version_id"],
            )
            emu.admin.advance(3600)
            assert sdk.clusters.retrieve(created.cluster_id).status == "Ready"
            # The same key means the same project and organization as when the state was written.
            assert created.project_id == old["outputs"]["api_project_id"]
        finally:
            sdk.close()

        relocated = (
            FIXTURE.read_text()
            .replace(old["id"], created.cluster_id)
            .replace(json.dumps(old["outputs"]["api_endpoint"]), json.dumps(emu.base_url))
        )
        assert _cluster_resource(json.loads(relocated))["inputs"] == inputs, "only the id and endpoint move"
        state_file = tmp_path / "state.json"
        state_file.write_text(relocated)

        project = _engine.write_project(tmp_path / "prog", record.PROJECT, record.PROGRAM)
        env = _engine.engine_env(
            tmp_path,
            pythonpath=[_engine.ROOT],
            extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": record.API_KEY},
        )

        def pulumi(*args: str):
            return _engine.run_pulumi(list(args), cwd=project, env=env)

        assert pulumi("stack", "init", record.STACK).returncode == 0
        proc = pulumi("stack", "import", "--file", str(state_file))
        assert proc.returncode == 0, _engine.output(proc)

        proc = pulumi("refresh", *_engine.UP_FLAGS)
        assert proc.returncode == 0, _engine.output(proc)
        refreshed = _cluster_resource(_engine.stack_export(project, env))
        assert refreshed["id"] == created.cluster_id
        assert refreshed["outputs"]["status"] == "Ready"
        # Today's program declares the same resource: same type token, so the same URN, and no change.
        proc = pulumi("preview", *_engine.PREVIEW_FLAGS, "--expect-no-changes")
        assert proc.returncode == 0, _engine.output(proc)

        proc = pulumi("destroy", *_engine.UP_FLAGS)
        assert proc.returncode == 0, _engine.output(proc)
        assert _engine.stack_resources(project, env) == []
        emu.admin.advance(3600)
        assert [c for c in emu.admin.clusters() if c["cluster_id"] == created.cluster_id] == []
