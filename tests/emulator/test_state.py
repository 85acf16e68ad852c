"""The simulated platform on its own: no HTTP, a frozen clock, fully deterministic."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from together_clusters.emulator.clock import EmulatedClock
from together_clusters.emulator.errors import EmulatorError
from together_clusters.emulator.faults import FaultSpec
from together_clusters.emulator.state import Platform
from together_clusters.emulator.store import Store
from together_clusters.provider.models import ClusterCreateRequest, ClusterUpdateRequest

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


def test_speed_shortens_durations_and_the_clock_keeps_to_the_wall_clock() -> None:
    wall = [1000.0]
    clock = EmulatedClock(speed=60, real=lambda: wall[0])
    assert clock.now() == 1000.0
    wall[0] = 1002.0
    assert clock.now() == 1002.0  # one second per second, whatever the speed
    assert clock.duration(600) == 10.0  # ten emulated minutes take ten seconds at speed 60
    clock.advance(5)
    assert clock.now() == 1007.0
    clock.set_speed(0)
    wall[0] = 1010.0
    assert clock.now() == 1007.0  # frozen
    assert clock.duration(600) == 600.0
    clock.set_speed(1)
    assert clock.now() == 1010.0  # running again: never behind the wall clock
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


def test_set_clock_checks_everything_before_changing_anything() -> None:
    platform = _platform()
    for speed, advance_s, param in [
        (5.0, -1.0, "advance_s"),
        (5.0, math.inf, "advance_s"),
        (5.0, 1e300, "advance_s"),
        (math.nan, 10.0, "speed"),
        (1e12, 10.0, "speed"),
    ]:
        with pytest.raises(EmulatorError) as err:
            platform.set_clock(speed=speed, advance_s=advance_s)
        assert err.value.param == param
        assert (platform.clock.speed, platform.clock.now()) == (0, START)
    assert platform.set_clock(speed=0, advance_s=60)["now_s"] == START + 60
    with pytest.raises(EmulatorError):
        platform.settings(grace_seconds=math.inf)


def test_restart_resumes_pending_fills_deletions_preemptions_and_faults(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.sqlite")
    platform = _platform(store)
    platform.set_capacity(REGION, GPU, 16)
    waiting = _create(platform, cluster_name="waiting", num_preemptible_gpus=8)
    preempted = _create(platform, cluster_name="preempted", num_preemptible_gpus=8)
    platform.clock.advance(30)
    platform.preempt(preempted)
    going = _create(platform, cluster_name="going")
    platform.delete_cluster("owner", going)
    platform.add_fault(FaultSpec(status=503, count=2))
    platform.add_provisioning_faults("stuck")
    # Both clusters got their 8 GPUs; "waiting" now wants 8 more, which the refilled pool grants 30 s later.
    platform.update_cluster("owner", waiting, ClusterUpdateRequest(num_preemptible_gpus=16))
    platform.set_capacity(REGION, GPU, 8)
    platform.flush()
    store.close()

    store = Store(tmp_path / "state.sqlite")
    restored = Platform(store=store, speed=0, grace_seconds=None)
    assert [f.count for f in restored.list_faults()] == [2]
    assert restored.pending_provisioning_faults() == ["stuck"]
    restored.clock.advance(300)
    assert restored.get_cluster("owner", waiting).allocated_preemptible_gpus == 16
    assert restored.get_cluster("owner", preempted).allocated_preemptible_gpus == 0
    with pytest.raises(EmulatorError):
        restored.get_cluster("owner", going)
    store.close()


def test_parallel_preemptions_never_pick_the_same_node() -> None:
    platform = _platform()
    platform.set_capacity(REGION, GPU, 64)
    cluster_id = _create(platform, num_preemptible_gpus=64)
    platform.clock.advance(30)

    def preempt(_: int) -> list[str]:
        return list(platform.preempt(cluster_id)["preempted"])

    with ThreadPoolExecutor(max_workers=8) as pool:
        victims = [v for batch in pool.map(preempt, range(8)) for v in batch]
    assert len(victims) == len(set(victims)) == 8
    with pytest.raises(EmulatorError) as err:
        platform.preempt(cluster_id)
    assert err.value.status == 409
