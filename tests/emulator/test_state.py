"""The simulated platform on its own: no HTTP, a frozen clock, fully deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.clock import EmulatedClock
from emulator.errors import EmulatorError
from emulator.state import Platform
from emulator.store import Store
from provider.models import ClusterCreateRequest, ClusterUpdateRequest

from .conftest import GPU, REGION, create_body

START = 1_800_000_000.0


def _platform(store: Store | None = None) -> Platform:
    return Platform(clock=EmulatedClock(start=START, speed=0), store=store)


def _create(platform: Platform, **overrides: object) -> str:
    req = ClusterCreateRequest.model_validate(create_body(**overrides))
    return platform.create_cluster("owner", "proj-owner", req).cluster_id


def test_same_calls_same_result() -> None:
    views = []
    for _ in range(2):
        platform = _platform()
        cluster_id = _create(platform, num_preemptible_gpus=16)
        platform.clock.advance(650)
        platform.preempt(cluster_id)
        platform.clock.advance(300)
        view = platform.get_cluster("owner", cluster_id).model_dump(
            mode="json", exclude={"cluster_id", "kube_config"}
        )
        for node in view["gpu_worker_nodes"] + view["deleted_gpu_worker_nodes"]:
            node.pop("instance_id")
        views.append(view)
    assert views[0] == views[1]
    assert views[0]["allocated_preemptible_gpus"] == 8


def test_clock_speed_and_advance() -> None:
    ticks = iter([0.0, 0.0, 2.0, 2.0, 3.0, 9.0])
    clock = EmulatedClock(start=100.0, speed=60, real=lambda: next(ticks))
    assert clock.now() == 100.0
    assert clock.now() == 220.0
    clock.set_speed(0)
    clock.advance(5)
    assert clock.now() == 225.0
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_update_only_touches_given_fields() -> None:
    platform = _platform()
    cluster_id = _create(platform, num_gpus=16, num_preemptible_gpus=8)
    updated = platform.update_cluster("owner", cluster_id, ClusterUpdateRequest(num_preemptible_gpus=0))
    assert (updated.num_gpus, updated.desired_preemptible_gpus) == (16, 0)
    with pytest.raises(EmulatorError) as err:
        platform.update_cluster("someone-else", cluster_id, ClusterUpdateRequest(num_gpus=8))
    assert err.value.status == 404


def test_store_round_trip(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.sqlite")
    platform = _platform(store)
    cluster_id = _create(platform, num_preemptible_gpus=8)
    platform.set_capacity(REGION, GPU, 40)
    platform.clock.advance(100)
    platform.flush()
    before = platform.get_cluster("owner", cluster_id)
    store.close()

    store = Store(tmp_path / "state.sqlite")
    restored = Platform(store=store, speed=0)
    assert restored.clock.now() == pytest.approx(START + 100)
    assert restored.get_cluster("owner", cluster_id) == before
    assert (
        next(p for p in restored.capacity() if p["gpu_type"] == GPU and p["region"] == REGION)[
            "preemptible_gpus"
        ]
        == 32
    )
    store.close()
