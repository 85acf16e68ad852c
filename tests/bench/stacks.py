"""Pulumi stacks the engine benchmarks run: N clusters, or N no-op dynamic resources with the same inputs.

Both run on the project's engine (``.engine/bin``, the environment of tests/_engine.py), each in its own
project directory with its own file backend under the benchmark's work directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests import _engine
from together_clusters.provider.host import PLUGIN_DIR

from .servers import API_KEY, ROOT

ENGINE_BIN = ROOT / ".engine" / "bin"

_INPUTS = """\
def inputs(i):
    return dict(
        cluster_name=f"{pulumi.get_stack()}-c{i}",
        region="us-central-8",
        gpu_type="H100_SXM",
        num_gpus=8,
        num_preemptible_gpus=(config.get_int("preemptible") or 0) if i == 0 else 0,
    )
"""

CLUSTER_PROGRAM = f"""\
import pulumi
from together_clusters.provider import Cluster, ClusterArgs

config = pulumi.Config()
{_INPUTS}
for i in range(config.require_int("count")):
    Cluster(f"c{{i}}", ClusterArgs(**inputs(i)))
"""

NOOP_PROGRAM = f"""\
import pulumi
from tests.bench.noop_provider import NoopResource

config = pulumi.Config()
{_INPUTS}
for i in range(config.require_int("count")):
    NoopResource(f"c{{i}}", inputs(i))
"""

# Pulumi's project-plugin override: the dynamic-provider plugin is the package's launcher of
# together_clusters.provider.host, as a user's Pulumi.yaml opts in (README "Benchmarks").
_LIFTED_PLUGINS = f"""\
plugins:
  providers:
    - name: pulumi-python
      path: {json.dumps(str(PLUGIN_DIR))}
"""


def engine_missing() -> str | None:
    """Why the engine cannot run here, or None when it can."""
    if not (ROOT / ".engine" / "stamp").exists():
        return "the Pulumi engine is not installed (.engine/stamp missing: run scripts/install-engine)"
    if not _engine.engine_installed():
        return "the Pulumi engine is out of date (scripts/install-engine --check failed)"
    return None


class PulumiFailed(RuntimeError):
    """A pulumi command of a benchmark failed."""


@dataclass
class Stack:
    """One stack of one benchmark project; ``run`` times a pulumi command on it."""

    project: Path
    name: str
    env: dict[str, str]

    def run(self, *args: str, ok: tuple[int, ...] = (0,), on_stack: bool = True) -> float:
        """Run ``pulumi ARGS --stack NAME`` and return its wall time in seconds."""
        pulumi = ENGINE_BIN / "pulumi"
        command = [str(pulumi) if pulumi.exists() else "pulumi", *args]
        if on_stack:
            command += ["--stack", self.name]
        started = time.perf_counter()
        proc = subprocess.run(
            command, cwd=self.project, env=self.env, capture_output=True, text=True, timeout=1800, check=False
        )
        elapsed = time.perf_counter() - started
        if proc.returncode not in ok:
            raise PulumiFailed(
                f"pulumi {' '.join(args)} on {self.project.name}/{self.name} failed (exit {proc.returncode}):\n"
                f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        return elapsed

    def up(self) -> float:
        return self.run("up", *_engine.UP_FLAGS)

    def preview(self, *extra: str) -> float:
        return self.run("preview", *_engine.PREVIEW_FLAGS, *extra)

    def refresh_preview(self) -> float:
        return self.run("preview", "--refresh", *_engine.PREVIEW_FLAGS)

    def destroy(self) -> float:
        return self.run("destroy", *_engine.UP_FLAGS)

    def set_config(self, key: str, value: str) -> None:
        self.run("config", "set", key, value)


def make_stack(
    workdir: Path,
    kind: str,
    name: str,
    count: int,
    base_url: str,
    lifted: bool = False,
) -> Stack:
    """A new stack of ``count`` resources (``kind`` "clusters" or "noop") against the API at ``base_url``.

    ``lifted``: the project runs the dynamic-provider host of together_clusters.provider.host.
    """
    program = CLUSTER_PROGRAM if kind == "clusters" else NOOP_PROGRAM
    project = _engine.write_project(
        workdir / f"{kind}-{name}", f"bench-{kind}", program, virtualenv=_engine.VENV
    )
    if lifted:
        with (project / "Pulumi.yaml").open("a") as pulumi_yaml:
            pulumi_yaml.write(_LIFTED_PLUGINS)
    env = _engine.engine_env(
        project,
        pythonpath=[ROOT],
        extra={"TOGETHER_BASE_URL": base_url, "TOGETHER_API_KEY": API_KEY},
    )
    env.pop("PULUMI_PARALLEL", None)  # the engine's default parallelism, as users get it
    env["PATH"] = os.pathsep.join([str(ENGINE_BIN), env.get("PATH", os.defpath)])
    stack = Stack(project, name, env)
    stack.run("stack", "init", name, on_stack=False)
    stack.set_config("count", str(count))
    return stack
