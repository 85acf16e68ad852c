"""Every server-side rule refuses a bad request with a 400 naming the field (and the value)."""

from __future__ import annotations

from typing import Any

import pytest
import together

from .conftest import REGION, create_body

CREATE_CASES = [
    ({"num_gpus": 4}, "num_gpus", "got 4"),
    ({"num_gpus": 0}, "num_gpus", "one standard node"),
    ({"num_gpus": 12}, "num_gpus", "got 12"),
    ({"num_preemptible_gpus": 4}, "num_preemptible_gpus", "got 4"),
    ({"num_preemptible_gpus": -8}, "num_preemptible_gpus", "got -8"),
    ({"region": "mars-1"}, "region", "mars-1"),
    ({"gpu_type": "L40_PCIE"}, "gpu_type", "L40_PCIE"),
    ({"gpu_type": "TPU"}, "gpu_type", "TPU"),
    ({"nvidia_version_id": "nv-999"}, "nvidia_version_id", "nv-999"),
    (
        {"nvidia_version_id": None, "cuda_version": "12.4", "nvidia_driver_version": "570"},
        "cuda_version",
        "12.4/570",
    ),
    ({"nvidia_version_id": None, "cuda_version": "12.4"}, "nvidia_driver_version", "missing"),
    ({"cuda_version": "12.4", "nvidia_driver_version": "550"}, "nvidia_version_id", "does not match"),
    # No driver selector at all: the SDK refuses it, so does the API; nothing picks a default.
    ({"nvidia_version_id": None}, "nvidia_version_id", "nvidia_driver_version"),
    ({"nvidia_version_id": None, "nvidia_driver_version": "570"}, "cuda_version", "missing"),
    ({"billing_type": "SCHEDULED_CAPACITY"}, "reservation_start_time", "SCHEDULED_CAPACITY"),
    (
        {"billing_type": "SCHEDULED_CAPACITY", "reservation_start_time": "2030-01-01T00:00:00Z"},
        "reservation_end_time",
        "SCHEDULED_CAPACITY",
    ),
    ({"cluster_type": "SLURM"}, "slurm_shm_size_gib", "SLURM"),
    ({"billing_type": "BARTER"}, "billing_type", "BARTER"),
    ({"num_gpus": "eight"}, "num_gpus", "eight"),
    ({"cluster_name": "  "}, "cluster_name", "empty"),
    ({"cluster_name": None}, "cluster_name", "required"),
    ({"num_reserved_gpus": 8}, "num_reserved_gpus", "RESERVED"),
    ({"num_capacity_pool_gpus": 8}, "num_capacity_pool_gpus", "capacity_pool_id"),
    (
        {"shared_volume": {"region": "us-east-2", "size_tib": 1, "volume_name": "v"}},
        "shared_volume.region",
        "us-east-2",
    ),
    ({"billing_type": "RESERVED", "duration_days": 0}, "duration_days", "got 0"),
    ({"billing_type": "RESERVED", "num_reserved_gpus": 16}, "num_reserved_gpus", "got 16"),
]


@pytest.mark.parametrize(("overrides", "param", "in_message"), CREATE_CASES)
def test_create_rules(http: Any, admin: Any, overrides: dict[str, Any], param: str, in_message: str) -> None:
    reply = http().post("/v1/compute/clusters", json=create_body(**overrides))
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert param.split(".")[-1] in error["message"] and in_message in error["message"]
    assert admin.clusters() == []


def test_message_names_field_and_value(http: Any) -> None:
    reply = http().post("/v1/compute/clusters", json=create_body(num_gpus=4))
    assert reply.json()["error"]["message"] == (
        "num_gpus must be a multiple of 8 and at least 8 (one standard node); got 4"
    )


def test_valid_special_cases_are_accepted(http: Any) -> None:
    client = http()
    volume = client.post(
        "/v1/compute/clusters/storage/volumes", json={"region": REGION, "size_tib": 1, "volume_name": "kept"}
    )
    assert volume.status_code == 200, volume.text
    ok = [
        create_body(cluster_name="slurm", cluster_type="SLURM", slurm_shm_size_gib=64),
        create_body(
            cluster_name="sched",
            billing_type="SCHEDULED_CAPACITY",
            reservation_start_time="2030-01-01T00:00:00Z",
            reservation_end_time="2030-01-08T00:00:00Z",
        ),
        create_body(cluster_name="reserved", billing_type="RESERVED", num_gpus=16, num_reserved_gpus=8),
        create_body(
            cluster_name="pair", nvidia_version_id=None, cuda_version="12.4", nvidia_driver_version="550"
        ),
        create_body(cluster_name="vol", volume_id=volume.json()["volume_id"]),
    ]
    for body in ok:
        reply = client.post("/v1/compute/clusters", json=body)
        assert reply.status_code == 200, reply.text


UPDATE_CASES = [
    ({"num_gpus": 0}, "num_gpus", "one standard node"),
    ({"num_gpus": 20}, "num_gpus", "got 20"),
    ({"num_preemptible_gpus": 9}, "num_preemptible_gpus", "got 9"),
    ({"num_reserved_gpus": 8}, "num_reserved_gpus", "ON_DEMAND"),
    ({"cluster_type": "SLURM"}, "cluster_type", "slurm_shm_size_gib"),
    ({"add_ons": [{"name": "ghost"}]}, "add_ons.0.name", "ghost"),
    ({"num_capacity_pool_gpus": 8}, "num_capacity_pool_gpus", "capacity_pool_id"),
]


@pytest.mark.parametrize(("body", "param", "in_message"), UPDATE_CASES)
def test_update_rules(http: Any, body: dict[str, Any], param: str, in_message: str) -> None:
    client = http()
    cluster = client.post("/v1/compute/clusters", json=create_body()).json()
    reply = client.put(f"/v1/compute/clusters/{cluster['cluster_id']}", json=body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param
    assert in_message in reply.json()["error"]["message"]
    assert client.get(f"/v1/compute/clusters/{cluster['cluster_id']}").json()["num_gpus"] == 8


def test_update_rules_that_depend_on_the_cluster(http: Any) -> None:
    client = http()
    scheduled = create_body(
        billing_type="SCHEDULED_CAPACITY",
        reservation_start_time="2030-01-01T00:00:00Z",
        reservation_end_time="2030-01-08T00:00:00Z",
    )
    cluster_id = client.post("/v1/compute/clusters", json=scheduled).json()["cluster_id"]
    url = f"/v1/compute/clusters/{cluster_id}"
    early = client.put(url, json={"reservation_end_time": "2029-12-31T00:00:00Z"})
    assert early.status_code == 400 and early.json()["error"]["param"] == "reservation_end_time"
    assert "2029-12-31" in early.json()["error"]["message"]
    later = client.put(url, json={"reservation_end_time": "2030-02-01T00:00:00Z"})
    assert later.status_code == 200 and later.json()["reservation_end_time"].startswith("2030-02-01")


def test_shares_follow_a_smaller_num_gpus(http: Any, admin: Any) -> None:
    admin.set_capacity_pool("cp-1", REGION, "H100_SXM", 16)
    client = http()
    reserved = client.post(
        "/v1/compute/clusters", json=create_body(cluster_name="r", billing_type="RESERVED", num_gpus=16)
    ).json()
    pooled = client.post(
        "/v1/compute/clusters",
        json=create_body(cluster_name="p", num_gpus=16, capacity_pool_id="cp-1", num_capacity_pool_gpus=16),
    ).json()
    assert reserved["num_reserved_gpus"] == 16 and pooled["num_capacity_pool_gpus"] == 16
    shrunk = [
        client.put(f"/v1/compute/clusters/{c['cluster_id']}", json={"num_gpus": 8}).json()
        for c in (reserved, pooled)
    ]
    assert shrunk[0]["num_reserved_gpus"] == 8 and shrunk[1]["num_capacity_pool_gpus"] == 8


def test_sdk_raises_bad_request(sdk: Any) -> None:
    with pytest.raises(together.BadRequestError) as err:
        sdk().clusters.create(**create_body(num_gpus=4))
    assert "num_gpus" in str(err.value)
