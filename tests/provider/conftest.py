"""What the provider's tests share: one emulator a module, and a cluster's inputs as the engine sends them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import _engine
from together_clusters.emulator.server import RunningEmulator, start_emulator
from together_clusters.provider.schema import with_defaults


@pytest.fixture(scope="module")
def emu(request: pytest.FixtureRequest) -> Iterator[RunningEmulator]:
    """An emulator over real HTTP for the module, at 600 times real speed.

    In an engine test file (marked ``engine``) the module skips first, before the emulator starts, when
    the engine is not installed (``_engine.require_engine``).
    """
    if request.node.get_closest_marker("engine") is not None:
        _engine.require_engine()
    with start_emulator(speed=600) as running:
        yield running


def cluster_inputs(name: str, /, **overrides: Any) -> dict[str, Any]:
    """A cluster's inputs after ``check`` (named ``name`` unless ``overrides`` say): defaults settled, unset fields left out."""
    base = {
        "cluster_name": name,
        "region": "us-central-8",
        "gpu_type": "H100_SXM",
        "num_gpus": 8,
        "num_preemptible_gpus": 8,
        "ready_timeout_minutes": 2,
        "nvidia_version_id": "nv-570-cu128-ubuntu2204",
    }
    return {k: v for k, v in with_defaults(base | overrides).items() if v is not None}
