"""Fixtures for the drift tests that run the real engine against a real emulator.

One emulator (in-process, fast clock) and one deployed copy of the quickstart stack per module: each test
first puts the cluster back in the shape it needs with out-of-band API calls, rather than deploying again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import _engine
from together_clusters.emulator.server import RunningEmulator, start_emulator
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.models import ClusterUpdateRequest

STACK = "drifttest"
API_KEY = "drift-test-key"
REGION = "us-central-8"
GPU = "H100_SXM"
# Emulated seconds per real second: bring-up (600 s) takes one second, a preemption grace (300 s) half.
SPEED = 600


@dataclass
class Deployed:
    """A deployed quickstart stack: its project directory, engine environment, emulator and cluster."""

    stack: str
    project: Path
    state_dir: Path
    #: The file in the Pulumi home that says which stack of the project is selected.
    selection: Path
    env: dict[str, str]
    emu: RunningEmulator
    cluster_id: str

    def cli(
        self, *args: str, stack: str | None = "", env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``python -m together_clusters.cli ARGS [--stack STACK] --cwd PROJECT`` (this stack by default)."""
        command = [sys.executable, "-m", "together_clusters.cli", *args, "--cwd", str(self.project)]
        if stack is not None:
            command += ["--stack", stack or self.stack]
        return subprocess.run(
            command,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd=_engine.ROOT,
        )

    def pulumi(self, *args: str, stack: str = "") -> subprocess.CompletedProcess[str]:
        """``pulumi ARGS --stack STACK`` in the project, as the user would run it; it must succeed."""
        command = [*args, "--stack", stack or self.stack]
        return _engine.run_pulumi(command, cwd=self.project, env=self.env, check=True)

    def export(self, stack: str = "") -> dict[str, Any]:
        """The real stack's state, as ``pulumi stack export`` shows it."""
        return json.loads(self.pulumi("stack", "export", stack=stack).stdout)

    def api(self) -> TogetherClient:
        return TogetherClient(api_key=API_KEY, base_url=self.emu.base_url)

    def cluster(self) -> Any:
        with self.api() as client:
            return client.get_cluster(self.cluster_id)

    def set_preemptible(self, gpus: int) -> None:
        with self.api() as client:
            client.update_cluster(self.cluster_id, ClusterUpdateRequest(num_preemptible_gpus=gpus))

    def wait_for(self, what: str, predicate: Callable[[Any], bool], timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            cluster = self.cluster()
            if predicate(cluster):
                return cluster
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what}; cluster: {cluster.model_dump(exclude={'kube_config'})}"
                )
            time.sleep(0.2)

    def restore(self) -> None:
        """Back to the code's shape: 8 preemptible GPUs desired and allocated, the pool full, no faults."""
        self.emu.admin.clear_faults()
        self.emu.admin.set_capacity(REGION, GPU, 64)
        self.set_preemptible(8)
        self.wait_for("8 preemptible GPUs allocated", lambda c: c.allocated_preemptible_gpus == 8)

    def files(self) -> dict[str, str]:
        """sha256 of every file in the backend, the project and the Pulumi home (bytecode aside).

        The backend holds the state and its history, the project the stack config, the Pulumi home the
        user's current stack: a drift check changes none of them.
        """
        digests = {}
        for path in [*sorted(self.state_dir.rglob("*")), *sorted(self.project.rglob("*")), self.selection]:
            if path.is_file() and "__pycache__" not in path.parts:
                digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        return digests

    def unchanged(self, before: dict[str, str], exported: bytes) -> None:
        """Assert that the files and the exported state are byte for byte what they were."""
        assert self.files() == before
        assert self.pulumi("stack", "export").stdout.encode() == exported


def write_quickstart(directory: Path) -> Path:
    """A copy of the repository's quickstart project (Pulumi.yaml + program), runnable from anywhere."""
    project = yaml.safe_load((_engine.ROOT / "Pulumi.yaml").read_text())
    options = project["runtime"].get("options") or {}
    if "virtualenv" in options:  # else the engine env's PULUMI_RUNTIME_VIRTUALENV applies
        options["virtualenv"] = str(_engine.ROOT / options["virtualenv"])
    directory.mkdir(parents=True)
    (directory / "Pulumi.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
    main = directory / project["main"]
    shutil.copytree(_engine.ROOT / project["main"], main, ignore=shutil.ignore_patterns("__pycache__"))
    return directory


def workspace_file(project: Path, env: dict[str, str]) -> Path:
    """Where the engine keeps a project's selected stack (pkg/workspace: name, sha1 of Pulumi.yaml's path)."""
    name = yaml.safe_load((project / "Pulumi.yaml").read_text())["name"]
    digest = hashlib.sha1(str((project / "Pulumi.yaml").resolve()).encode()).hexdigest()
    return Path(env["PULUMI_HOME"]) / "workspaces" / f"{name}-{digest}-workspace.json"


def engine_env_for(workdir: Path, base_url: str) -> dict[str, str]:
    env = _engine.engine_env(workdir, pythonpath=[_engine.ROOT])
    env["PATH"] = f"{_engine.ROOT / '.engine' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["TOGETHER_BASE_URL"] = base_url
    env["TOGETHER_API_KEY"] = API_KEY
    return env


@pytest.fixture(scope="module")
def emu() -> Iterator[RunningEmulator]:
    # default_driver: the provider does not yet send a driver selector (issue 9, point 10).
    with start_emulator(speed=SPEED, default_driver=True) as running:
        yield running


def deploy_quickstart(
    work: Path,
    emu: RunningEmulator,
    stack: str = STACK,
    *,
    init_args: tuple[str, ...] = (),
    extra_env: dict[str, str] | None = None,
) -> Deployed:
    """``pulumi stack init`` + ``up`` of the quickstart in a project of its own under ``work``."""
    _engine.require_engine()
    project = write_quickstart(work / "project")
    env = {**engine_env_for(work, emu.base_url), **(extra_env or {})}

    def pulumi(*args: str) -> subprocess.CompletedProcess[str]:
        return _engine.run_pulumi(list(args), cwd=project, env=env, check=True)

    pulumi("stack", "init", stack, *init_args)
    pulumi("config", "set", "clusterName", f"drift-{work.name}")
    pulumi("up", *_engine.UP_FLAGS)
    outputs = _engine.stack_outputs(project, env)
    selection = workspace_file(project, env)
    assert selection.is_file(), f"the engine keeps the selected stack elsewhere than {selection}"
    state = Deployed(stack, project, work / ".pulumi-state", selection, env, emu, outputs["cluster_id"])
    state.wait_for("8 preemptible GPUs allocated", lambda c: c.allocated_preemptible_gpus == 8)
    return state


@pytest.fixture(scope="module")
def deployed(emu: RunningEmulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    state = deploy_quickstart(tmp_path_factory.mktemp("drift"), emu)
    yield state
    # The last test may have deleted the cluster out of band; destroy whatever is left.
    _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=state.project, env=state.env)
