"""``together-clusters status`` and ``drift`` read a stack whose clusters are the plugin's
``together:index:Cluster`` (a YAML program here), as they read a Python stack's dynamic ones: the state's
camelCase names are the same fields. A change made outside Pulumi with the official SDK is drift, named as the
program writes the field; status shows the cluster the stack tracks; neither writes anything."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import together

from tests import _engine
from together_clusters.emulator.server import RunningEmulator, start_emulator
from together_clusters.provider import native

pytestmark = pytest.mark.engine

API_KEY = "tgp_v1_native-stacks-key-0123456789"
PLUGIN_DIR = Path(native.__file__).resolve().parent / "plugin"

PROGRAM = f"""name: native-status
runtime: yaml
resources:
  gpus:
    type: together:index:Cluster
    properties:
      clusterName: native-status
      region: us-central-8
      gpuType: H100_SXM
      numGpus: 8
      numPreemptibleGpus: 8
      nvidiaVersionId: nv-570-cu128-ubuntu2204
outputs:
  clusterId: ${{gpus.clusterId}}
plugins:
  providers:
    - name: together
      path: {json.dumps(str(PLUGIN_DIR))}
"""


class YamlStack(_engine.ProjectStack):
    def __init__(self, workdir: Path, base_url: str) -> None:
        self.dir = workdir / "project"
        self.dir.mkdir(parents=True)
        (self.dir / "Pulumi.yaml").write_text(PROGRAM)
        self.env = _engine.engine_env(
            workdir, extra={"TOGETHER_BASE_URL": base_url, "TOGETHER_API_KEY": API_KEY}
        )
        self.run("stack", "init", "test", check=True)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``together-clusters ARGS --stack test --cwd PROJECT``, the real command line (the engine on PATH)."""
        env = {**self.env, "PATH": f"{_engine.ROOT / '.engine' / 'bin'}:{self.env.get('PATH', '')}"}
        command = [
            sys.executable,
            "-m",
            "together_clusters.cli",
            *args,
            "--stack",
            "test",
            "--cwd",
            str(self.dir),
        ]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def emu() -> Iterator[RunningEmulator]:
    _engine.require_engine()
    with start_emulator(speed=600) as running:
        yield running


@pytest.fixture(scope="module")
def stack(emu: RunningEmulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[YamlStack]:
    deployed = YamlStack(tmp_path_factory.mktemp("native-stacks"), emu.base_url)
    deployed.run("up", *_engine.UP_FLAGS, check=True)
    yield deployed
    deployed.run("destroy", *_engine.UP_FLAGS, check=True)


def test_status_shows_the_plugins_cluster(stack: YamlStack) -> None:
    cluster_id = stack.outputs()["clusterId"]
    proc = stack.cli("status", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [shown] = json.loads(proc.stdout)["clusters"]
    assert (shown["resource"], shown["cluster_id"], shown["found"]) == ("gpus", cluster_id, True)
    assert shown["desired_preemptible_gpus"] == 8 and shown["standard_nodes"] == 1


def test_drift_is_in_sync_then_names_a_change_made_with_the_sdk_as_the_program_writes_it(
    stack: YamlStack, emu: RunningEmulator
) -> None:
    proc = stack.cli("drift")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "in sync" in proc.stdout
    cluster_id = stack.outputs()["clusterId"]
    exported = stack.run("stack", "export", check=True).stdout
    sdk = together.Together(api_key=API_KEY, base_url=emu.base_url, max_retries=2)
    try:
        sdk.clusters.update(cluster_id, num_preemptible_gpus=16)
        proc = stack.cli("drift", "--json")
    finally:
        sdk.clusters.update(cluster_id, num_preemptible_gpus=8)
        sdk.close()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [found] = json.loads(proc.stdout)["stacks"]
    assert [(d["resource"], d["field"], d["code"], d["live"]) for d in found["drift"]] == [
        ("gpus", "numPreemptibleGpus", 8, 16)
    ]
    assert stack.run("stack", "export", check=True).stdout == exported  # drift wrote nothing
