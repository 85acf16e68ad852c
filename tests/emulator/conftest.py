"""Fixtures: one emulator per test session on 127.0.0.1, reset and frozen before every test.

The clock is frozen (speed 0) so tests move it explicitly with ``advance``: no sleeping, no flakiness.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

import httpx
import pytest
import together

from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.server import RunningEmulator, start_emulator

REGION: Final = "us-central-8"
GPU: Final = "H100_SXM"
DRIVER: Final = "nv-570-cu128-ubuntu2204"


@pytest.fixture(scope="session")
def _server() -> Iterator[RunningEmulator]:
    with start_emulator(port=0, speed=0) as emu:
        yield emu


@pytest.fixture
def emu(_server: RunningEmulator) -> RunningEmulator:
    _server.admin.reset()
    _server.admin.set_speed(0)
    return _server


@pytest.fixture
def admin(emu: RunningEmulator) -> AdminClient:
    return emu.admin


@pytest.fixture
def sdk(emu: RunningEmulator) -> Iterator[Callable[..., together.Together]]:
    """Official SDK clients for any API key; no retries unless asked, so faults surface."""
    clients: list[together.Together] = []

    def make(api_key: str = "key-alice", max_retries: int = 0) -> together.Together:
        client = together.Together(api_key=api_key, base_url=emu.base_url, max_retries=max_retries)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def http(emu: RunningEmulator) -> Iterator[Callable[..., httpx.Client]]:
    """Raw HTTP clients, authenticated with the given key (or none), giving up after ``timeout`` seconds."""
    clients: list[httpx.Client] = []

    def make(api_key: str | None = "key-alice", timeout: float = 10) -> httpx.Client:
        # httpx refuses a header value ending in a space, so an empty key is sent as a bare "Bearer".
        headers = {"Authorization": f"Bearer {api_key}".strip()} if api_key is not None else {}
        client = httpx.Client(base_url=emu.base_url, headers=headers, timeout=timeout)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def create_body(**overrides: Any) -> dict[str, Any]:
    """A valid create request body, with ``overrides`` applied (``None`` drops a field)."""
    body: dict[str, Any] = {
        "cluster_name": "train",
        "region": REGION,
        "gpu_type": GPU,
        "num_gpus": 8,
        "billing_type": "ON_DEMAND",
        "nvidia_version_id": DRIVER,
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}
