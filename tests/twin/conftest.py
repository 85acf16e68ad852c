"""Fixtures of the Kubernetes twin tests: one emulator with the twin and one cluster for the whole package.

The twin needs the binaries from scripts/install-kubernetes: without them these tests skip locally and fail
with CI=true (like the engine tests). One control plane costs about 1 GiB and a few seconds to start, so
the tests share one cluster (8 standard + 16 preemptible GPUs), each in its own namespace, and leave it
with that node set.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._engine import in_ci
from together_clusters.emulator.kubernetes import binaries
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.emulator.server import RunningEmulator, start_emulator

from ._twin import GPU, REGION, TwinCluster

INSTALL = "scripts/install-kubernetes"
ROOT = Path(__file__).resolve().parents[2]


def require_twin() -> None:
    """Skip the calling test without a current build; with CI=true, fail it instead."""
    check = subprocess.run([str(ROOT / INSTALL), "--check"], capture_output=True, text=True, check=False)
    if check.returncode == 0 and binaries.find() is not None:
        return
    message = f"the Kubernetes twin is not built or out of date: run {INSTALL}"
    if in_ci():
        pytest.fail(f"{message} (CI=true: twin tests may not be skipped)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="package")
def twin_emulator() -> Iterator[RunningEmulator]:
    require_twin()
    # Speed 60: a bring-up of ten emulated minutes takes ten seconds, a 300 s grace period five.
    # JobSet pre-installed, as in a cluster someone prepared: these tests drive JobSets with the kubernetes
    # client; the engine tests install it the way a user's stack does (ClusterControllers on a bare twin).
    options = TwinOptions(job_pod_failure_backoff="1s", jobset=True)
    with start_emulator(speed=60, kubernetes=options) as emulator:
        # A preemption takes its GPUs out of the pool for good (they went to whoever reclaimed them), and
        # the refill needs free ones: the package preempts more often than the default pool could refill.
        emulator.admin.set_capacity(REGION, GPU, 1024)
        yield emulator


@pytest.fixture(scope="package")
def cluster(twin_emulator: RunningEmulator) -> Iterator[TwinCluster]:
    with TwinCluster.create(twin_emulator, "twin", num_gpus=8, num_preemptible_gpus=16) as created:
        created.wait_for_nodes(standard=1, preemptible=2)
        yield created


@pytest.fixture
def namespace(cluster: TwinCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    readable = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{readable}-{hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]}"
    cluster.core.create_namespace({"metadata": {"name": name}})
    yield name
    cluster.core.delete_namespace(name)
