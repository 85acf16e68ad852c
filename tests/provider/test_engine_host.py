"""The dynamic-provider host of together_clusters.provider.host, opted into through Pulumi.yaml as README
says, serves as many calls at once as the engine sends: 8 creates that each wait for the 7 others all
finish. The SDK's own host serves 4 at a time, so the same stack fails there (its creates give up waiting).
"""

from __future__ import annotations

import json

import pytest

from tests import _engine
from together_clusters.provider.host import PLUGIN_DIR

pytestmark = pytest.mark.engine

PARALLEL = 8
# Only a host that cannot serve PARALLEL calls at once waits this long.
PATIENCE_S = 120.0

PROGRAM = f"""\
import pulumi
from tests.provider.gathering_provider import Gathering

for i in range({PARALLEL}):
    pulumi.export(f"g{{i}}", Gathering(f"g{{i}}", {PARALLEL}, {PATIENCE_S}).gathered)
"""


def test_host_serves_as_many_creates_at_once_as_the_engine_runs(tmp_path):
    _engine.require_engine()
    project = _engine.write_project(tmp_path / "gathering", "gathering", PROGRAM)
    with (project / "Pulumi.yaml").open("a") as pulumi_yaml:
        pulumi_yaml.write(
            f"plugins:\n  providers:\n    - name: pulumi-python\n      path: {json.dumps(str(PLUGIN_DIR))}\n"
        )
    env = _engine.engine_env(tmp_path, pythonpath=[_engine.ROOT])
    _engine.run_pulumi(["stack", "init", "host"], cwd=project, env=env, check=True)
    _engine.run_pulumi(
        ["up", *_engine.UP_FLAGS, "--parallel", str(PARALLEL)], cwd=project, env=env, check=True, timeout=600
    )
    outputs = _engine.stack_outputs(project, env)
    assert outputs == {f"g{i}": PARALLEL for i in range(PARALLEL)}
    _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=project, env=env, check=True)
