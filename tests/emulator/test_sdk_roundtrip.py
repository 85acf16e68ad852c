"""The official SDK drives the emulator end to end, and every reply passes the SDK's types strictly."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import together

from .conftest import DRIVER, GPU, REGION
from .strict import strict_cluster, strict_delete, strict_list, strict_regions

# Typed loosely: the SDK's TypedDicts would make mypy pick no overload for literal dicts.
ADD_ONS: Any = [
    {"add_on_type": "dashboard", "name": "dash", "config": {"dashboard": {"enabled": True}}},
    {"add_on_type": "ingress", "name": "off", "config": {"ingress": {"enabled": False}}},
]


def test_sdk_round_trip(sdk: Any, admin: Any) -> None:
    client: together.Together = sdk("key-alice")
    raw = client.clusters.with_raw_response

    regions = raw.list_regions()
    names = {r.name for r in strict_regions(regions.http_response.text).regions}
    assert names == {"us-central-8", "us-east-2", "eu-north-1"}
    assert regions.http_response.headers["x-request-id"]

    created = raw.create(
        cluster_name="sdk-train",
        region=REGION,
        gpu_type=GPU,
        num_gpus=16,
        billing_type="ON_DEMAND",
        nvidia_version_id=DRIVER,
        num_preemptible_gpus=8,
        cluster_config={"load_balancer": "NONE"},
        add_ons=ADD_ONS,
        shared_volume={"region": REGION, "size_tib": 2, "volume_name": "data"},
    )
    cluster = strict_cluster(created.http_response.text)
    assert created.parse().cluster_id == cluster.cluster_id
    assert cluster.desired_preemptible_gpus == 8
    assert cluster.status == "WaitingForControlPlaneNodes"
    assert cluster.cuda_version == "12.8" and cluster.nvidia_driver_version == "570"
    assert cluster.nvidia_driver_version_id == DRIVER
    assert [a.name for a in cluster.add_ons] == ["dash"]
    assert cluster.volumes[0].volume_name == "data" and cluster.volumes[0].size_tib == 2
    assert cluster.cluster_config is not None and cluster.cluster_config.load_balancer == "NONE"
    assert (
        f"https://{cluster.cluster_id}.k8s.emulator.invalid" in base64.b64decode(cluster.kube_config).decode()
    )
    assert cluster.project_id.startswith("proj-") and "key-alice" not in created.http_response.text

    admin.advance(700)
    got = raw.retrieve(cluster.cluster_id)
    ready = strict_cluster(got.http_response.text)
    assert ready.status == "Ready" and ready.first_ready_at is not None and ready.control_plane_ready
    assert ready.allocated_preemptible_gpus == 8
    assert len(ready.gpu_worker_nodes) == 3
    assert all(n.status == "Ready" and n.num_gpus == 8 for n in ready.gpu_worker_nodes)

    updated = raw.update(ready.cluster_id, num_preemptible_gpus=16)
    after = strict_cluster(updated.http_response.text)
    assert after.desired_preemptible_gpus == 16
    admin.advance(60)
    grown = client.clusters.retrieve(ready.cluster_id)
    assert grown.allocated_preemptible_gpus == 16

    listed = raw.list()
    assert [c.cluster_id for c in strict_list(listed.http_response.text).clusters] == [ready.cluster_id]

    deleted = raw.delete(ready.cluster_id)
    assert strict_delete(deleted.http_response.text).cluster_id == ready.cluster_id
    assert client.clusters.retrieve(ready.cluster_id).status == "Deleting"
    admin.advance(120)
    assert client.clusters.list().clusters == []


def test_legacy_driver_pair_and_no_default_driver(sdk: Any) -> None:
    client: together.Together = sdk()
    legacy = client.clusters.create(
        cluster_name="legacy",
        region="us-east-2",
        gpu_type="L40_PCIE",
        num_gpus=8,
        billing_type="ON_DEMAND",
        cuda_version="12.4",
        nvidia_driver_version="550",
    )
    assert legacy.nvidia_driver_version_id == "nv-550-cu124-ubuntu2204"
    # The SDK insists on a driver selector, and so does the server: it never picks one silently.
    with pytest.raises(together.BadRequestError) as err:
        client.post(
            "/v1/compute/clusters",
            body={
                "cluster_name": "default",
                "region": "eu-north-1",
                "gpu_type": "GB200_SXM",
                "num_gpus": 8,
                "billing_type": "RESERVED",
            },
            cast_to=together.types.Cluster,
        )
    assert "nvidia_version_id" in str(err.value)
    assert client.clusters.list().clusters == [legacy]
