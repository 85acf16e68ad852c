"""Fixtures for the drift tests that run the real engine against a real emulator.

One emulator (in-process, fast clock) and one deployed copy of the quickstart stack per module: each test
first puts the cluster back in the shape it needs with out-of-band API calls, rather than deploying again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
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

    project: Path
    state_dir: Path
    env: dict[str, str]
    emu: RunningEmulator
    cluster_id: str

    def cli(
        self, *args: str, stack: str = STACK, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``python -m together_clusters.drift ARGS --stack STACK --cwd PROJECT``."""
        command = [
            sys.executable,
            "-m",
            "together_clusters.drift",
            *args,
            "--stack",
            stack,
            "--cwd",
            str(self.project),
        ]
        return subprocess.run(
            command,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd=_engine.ROOT,
        )

    def export(self) -> dict[str, Any]:
        """The real stack's state, as ``pulumi stack export`` shows it."""
        return _engine.stack_export(self.project, self.env)

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
        """sha256 of every file in the backend and the project (the program's bytecode aside)."""
        digests = {}
        for base in (self.state_dir, self.project):
            for path in sorted(base.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        return digests


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


@pytest.fixture(scope="module")
def deployed(emu: RunningEmulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    _engine.require_engine()
    work = tmp_path_factory.mktemp("drift")
    project = write_quickstart(work / "project")
    env = engine_env_for(work, emu.base_url)

    def pulumi(*args: str) -> subprocess.CompletedProcess[str]:
        return _engine.run_pulumi(list(args), cwd=project, env=env, check=True)

    pulumi("stack", "init", STACK)
    pulumi("config", "set", "clusterName", "drift-quickstart")
    pulumi("up", *_engine.UP_FLAGS)
    outputs = _engine.stack_outputs(project, env)
    state = Deployed(project, work / ".pulumi-state", env, emu, outputs["cluster_id"])
    state.wait_for("8 preemptible GPUs allocated", lambda c: c.allocated_preemptible_gpus == 8)
    yield state
    # The last test may have deleted the cluster out of band; destroy whatever is left.
    _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=project, env=env)


def free_port_url() -> str:
    """A loopback URL nothing listens on (the port was free a moment ago)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
    return f"http://127.0.0.1:{port}"
