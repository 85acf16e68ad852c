"""A YAML program's ``pulumi up`` killed while the plugin ``together`` creates its cluster (SIGKILL of the engine
and its plugins, as a cancelled CI job or a closed laptop is), then rerun as the error says: the rerun makes no
second cluster and says, in one line, how to take the first one into the stack, in the spelling a YAML program
writes (``adoptClusterId``); following it leaves exactly that cluster tracked, and a destroy deletes it. The
same promise as the Python stack's (tests/campaign/test_engine_campaign.py), through the other front door."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from tests import _engine
from together_clusters.emulator.server import start_emulator
from together_clusters.provider import native

pytestmark = pytest.mark.engine

API_KEY = "tgp_v1_engine-native-kill-0123456789"
PLUGIN_DIR = Path(native.__file__).resolve().parent / "plugin"
UP = ["up", *_engine.UP_FLAGS]

PROGRAM = """name: killed
runtime: yaml
resources:
  gpus:
    type: together:index:Cluster
    properties:
      clusterName: killed-yaml
      region: us-central-8
      gpuType: H100_SXM
      numGpus: 8
      numPreemptibleGpus: 8
      nvidiaVersionId: nv-570-cu128-ubuntu2204
{adopt}outputs:
  clusterId: ${{gpus.clusterId}}
plugins:
  providers:
    - name: together
      path: {plugin}
"""


class YamlStack(_engine.ProjectStack):
    def __init__(self, workdir: Path, base_url: str) -> None:
        self.dir = workdir / "project"
        self.dir.mkdir(parents=True)
        self.write()
        self.env = _engine.engine_env(
            workdir, extra={"TOGETHER_BASE_URL": base_url, "TOGETHER_API_KEY": API_KEY}
        )
        self.run("stack", "init", "test", check=True)

    def write(self, adopt_cluster_id: str | None = None) -> None:
        adopt = f"      adoptClusterId: {adopt_cluster_id}\n" if adopt_cluster_id else ""
        (self.dir / "Pulumi.yaml").write_text(PROGRAM.format(adopt=adopt, plugin=json.dumps(str(PLUGIN_DIR))))

    def tracked(self) -> list[str]:
        return [
            r["id"]
            for r in _engine.stack_resources(self.dir, self.env)
            if r["type"] == "together:index:Cluster"
        ]


def test_a_killed_yaml_up_then_a_rerun_makes_no_second_cluster_and_names_the_yaml_recovery(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _engine.require_engine()
    seed = int(os.environ.get("CAMPAIGN_FRESH_SEED") or int.from_bytes(os.urandom(4), "big"))
    rng = random.Random(f"native-kill:{seed}")
    # Slow enough that the create waits for Ready a few seconds: the kill lands inside that wait.
    with start_emulator(speed=120) as emu:
        stack = YamlStack(tmp_path, emu.base_url)

        def live() -> list[str]:
            return [c["cluster_id"] for c in emu.admin.clusters() if c["status"] != "Deleting"]

        with _engine.up_killed_on_exit(stack.dir, stack.env) as running:
            deadline = time.monotonic() + 120
            while not emu.admin.clusters():
                assert running.poll() is None and time.monotonic() < deadline, (
                    "the create never reached the API"
                )
                time.sleep(0.05)
            time.sleep(rng.uniform(0, 1.5))
        (stray,) = live()

        rerun = stack.run(*UP)
        said = rerun.stdout + rerun.stderr
        assert rerun.returncode != 0, _engine.output(rerun)
        assert live() == [stray], _engine.output(rerun)
        line = next(s for s in said.splitlines() if f"already held by cluster {stray}" in s)
        assert f"adoptClusterId: {stray}" in line, line
        assert "Traceback" not in said, _engine.output(rerun)

        stack.write(adopt_cluster_id=stray)  # the recovery exactly as the line spells it
        stack.run(*UP, check=True)
        with capsys.disabled():
            print(
                f"\nyaml engine kill (seed {seed}): rerun refused, adopted {stray}; tracked {stack.tracked()}"
            )
        assert live() == [stray] == stack.tracked()
        assert stack.run("preview", *_engine.PREVIEW_FLAGS, "--expect-no-changes").returncode == 0

        stack.run("destroy", *_engine.UP_FLAGS, check=True)
        assert live() == []
