"""Shared volumes on the simulated platform alone: bound to their cluster, gone with it unless independent."""

from __future__ import annotations

from pathlib import Path

import pytest

from together_clusters.emulator.clock import EmulatedClock
from together_clusters.emulator.errors import EmulatorError
from together_clusters.emulator.shapes import ClusterCreateRequest, StorageCreateRequest, StorageUpdateRequest
from together_clusters.emulator.state import Platform
from together_clusters.emulator.store import Store

from .conftest import REGION, create_body

START = 1_800_000_000.0
# Long enough for any deletion to finish.
DELETED = 3600


def _platform(store: Store | None = None) -> Platform:
    return Platform(clock=EmulatedClock(start=START, speed=0), store=store)


def _cluster(platform: Platform, **overrides: object) -> dict:
    req = ClusterCreateRequest.model_validate(create_body(**overrides))
    return platform.create_cluster("owner", "proj-owner", req)


def _volume(platform: Platform, **overrides: object) -> dict:
    body = {"region": REGION, "size_tib": 2, "volume_name": "ckpt"} | overrides
    return platform.create_volume("owner", "proj-owner", StorageCreateRequest.model_validate(body))


def _ids(platform: Platform) -> list[str]:
    return [v["volume_id"] for v in platform.list_volumes("owner")["volumes"]]


@pytest.mark.parametrize("independent", [False, True])
def test_an_inline_volume_goes_with_its_cluster_unless_lifecycle_independent(independent: bool) -> None:
    platform = _platform()
    shared = {
        "region": REGION,
        "size_tib": 1,
        "volume_name": "inline",
        "is_lifecycle_independent": independent,
    }
    cluster = _cluster(platform, shared_volume=shared)
    [volume] = cluster["volumes"]
    assert platform.get_volume("owner", volume["volume_id"])["status"] == "bound"
    platform.delete_cluster("owner", cluster["cluster_id"])
    # Still bound while the cluster is Deleting.
    assert _ids(platform) == [volume["volume_id"]]
    platform.clock.advance(DELETED)
    if independent:
        assert platform.get_volume("owner", volume["volume_id"])["status"] == "available"
    else:
        assert _ids(platform) == []


def test_a_volume_of_another_region_is_refused_and_no_cluster_made() -> None:
    platform = _platform()
    volume = _volume(platform, region="us-east-2")
    with pytest.raises(EmulatorError) as refused:
        _cluster(platform, volume_id=volume["volume_id"])
    assert refused.value.status == 400 and refused.value.param == "volume_id"
    assert "us-east-2" in str(refused.value)
    assert platform.list_clusters("owner")["clusters"] == []


def test_a_volume_bound_to_a_live_cluster_is_not_attached_twice_nor_deleted() -> None:
    platform = _platform()
    volume = _volume(platform, is_lifecycle_independent=True)
    _cluster(platform, volume_id=volume["volume_id"])
    with pytest.raises(EmulatorError) as twice:
        _cluster(platform, cluster_name="other", volume_id=volume["volume_id"])
    assert twice.value.status == 409
    with pytest.raises(EmulatorError) as delete:
        platform.delete_volume("owner", volume["volume_id"])
    assert delete.value.status == 409 and "attached" in str(delete.value)


def test_a_volume_only_grows() -> None:
    platform = _platform()
    volume = _volume(platform)
    grown = platform.update_volume("owner", StorageUpdateRequest(volume_id=volume["volume_id"], size_tib=4))
    assert grown["size_tib"] == 4
    with pytest.raises(EmulatorError) as shrink:
        platform.update_volume("owner", StorageUpdateRequest(volume_id=volume["volume_id"], size_tib=3))
    assert shrink.value.status == 400 and shrink.value.param == "size_tib"
    assert platform.get_volume("owner", volume["volume_id"])["size_tib"] == 4


def test_volumes_are_the_owners_own() -> None:
    platform = _platform()
    volume = _volume(platform)
    with pytest.raises(EmulatorError) as other:
        platform.get_volume("someone-else", volume["volume_id"])
    assert other.value.status == 404
    assert platform.list_volumes("someone-else")["volumes"] == []
    assert platform.list_volumes("owner", "proj-owner")["volumes"] == [volume]
    assert platform.list_volumes("owner", "another-project")["volumes"] == []


def test_volumes_survive_a_restart(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    platform = _platform(store)
    volume = _volume(platform)
    cluster = _cluster(platform, volume_id=volume["volume_id"])
    platform.flush()
    store.close()
    again = _platform(Store(tmp_path / "state.db"))
    assert again.get_volume("owner", volume["volume_id"])["status"] == "bound"
    assert again.get_cluster("owner", cluster["cluster_id"])["volumes"] == [
        again.get_volume("owner", volume["volume_id"])
    ]


def test_an_unknown_volume_id_is_refused() -> None:
    platform = _platform()
    with pytest.raises(EmulatorError) as unknown:
        _cluster(platform, volume_id="vol-nowhere")
    assert unknown.value.status == 404 and unknown.value.param == "volume_id"
    assert platform.list_clusters("owner")["clusters"] == []
