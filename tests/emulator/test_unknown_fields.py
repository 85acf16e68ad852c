"""A field the API does not define is ignored, as the API's JSON gateway ignores it, and recorded per request.

The known fields keep their strict checks: a wrong type or value is still a 400 naming the field. What was
ignored is listed by ``GET /_emulator/ignored-fields`` so a test can prove a client sends nothing extra.
"""

from __future__ import annotations

from typing import Any

import pytest

from together_clusters.emulator.shapes import ClusterCreateRequest

from .conftest import GPU, REGION, create_body

CLUSTERS = "/v1/compute/clusters"
VOLUMES = "/v1/compute/clusters/storage/volumes"


def test_a_create_with_fields_the_api_does_not_define_is_accepted_and_recorded(http: Any, admin: Any) -> None:
    # What Together's Terraform provider (through together-go) sends on create: the deprecated auto_scaled.
    body = create_body(auto_scaled=False, surprise={"deep": 1})
    reply = http().post(CLUSTERS, json=body)
    assert reply.status_code == 200, reply.text
    assert "auto_scaled" not in reply.json() and "surprise" not in reply.json()
    assert admin.ignored_fields() == [
        {"method": "POST", "route": CLUSTERS, "fields": ["auto_scaled", "surprise"]}
    ]


def test_an_update_with_the_whole_object_changes_only_what_the_api_defines(http: Any, admin: Any) -> None:
    client = http()
    cluster = client.post(CLUSTERS, json=create_body()).json()
    # The Terraform provider's update: the whole object, read-only and create-only fields included.
    whole = {
        "cluster_name": "renamed",
        "gpu_type": "H200_SXM",
        "region": "us-east-2",
        "project_id": "another",
        "billing_type": "RESERVED",
        "num_gpus": 16,
    }
    reply = client.put(f"{CLUSTERS}/{cluster['cluster_id']}", json=whole)
    assert reply.status_code == 200, reply.text
    updated = reply.json()
    assert updated["num_gpus"] == 16
    assert (updated["cluster_name"], updated["gpu_type"], updated["region"]) == ("train", GPU, REGION)
    assert updated["project_id"] == cluster["project_id"] and updated["billing_type"] == "ON_DEMAND"
    assert admin.ignored_fields() == [
        {
            "method": "PUT",
            "route": f"{CLUSTERS}/{{cluster_id}}",
            "fields": ["cluster_name", "gpu_type", "region", "project_id", "billing_type"],
        }
    ]


def test_nested_unknown_fields_are_ignored_and_named_by_their_path(http: Any, admin: Any) -> None:
    body = create_body(
        shared_volume={"region": REGION, "size_tib": 1, "volume_name": "v", "tier": "fast"},
        add_ons=[
            {"add_on_type": "dashboard", "name": "d", "config": {"dashboard": {"enabled": True, "x": 1}}}
        ],
        oidc_config=None,
    )
    reply = http().post(CLUSTERS, json=body)
    assert reply.status_code == 200, reply.text
    assert admin.ignored_fields()[0]["fields"] == ["shared_volume.tier", "add_ons.0.config.dashboard.x"]


def test_volume_requests_are_lenient_too(http: Any, admin: Any) -> None:
    client = http()
    volume = client.post(VOLUMES, json={"region": REGION, "size_tib": 1, "volume_name": "v", "tier": "fast"})
    assert volume.status_code == 200, volume.text
    resized = client.put(
        VOLUMES, json={"volume_id": volume.json()["volume_id"], "size_tib": 2, "region": REGION}
    )
    assert resized.status_code == 200 and resized.json()["size_tib"] == 2
    assert [(r["method"], r["fields"]) for r in admin.ignored_fields()] == [
        ("POST", ["tier"]),
        ("PUT", ["region"]),
    ]


@pytest.mark.parametrize(
    ("overrides", "param"),
    [
        ({"num_gpus": "eight", "surprise": 1}, "num_gpus"),
        ({"billing_type": "BARTER", "surprise": 1}, "billing_type"),
        (
            {"shared_volume": {"region": REGION, "size_tib": "big", "volume_name": "v", "x": 1}},
            "shared_volume.size_tib",
        ),
        ({"cluster_config": {"load_balancer": "CARRIER_PIGEON", "x": 1}}, "cluster_config.load_balancer"),
    ],
)
def test_known_fields_are_still_checked_strictly(
    http: Any, admin: Any, overrides: dict[str, Any], param: str
) -> None:
    reply = http().post(CLUSTERS, json=create_body(**overrides))
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param
    assert admin.clusters() == [] and admin.ignored_fields() == []


def test_the_record_is_cleared_on_demand_and_by_reset(http: Any, admin: Any) -> None:
    client = http()
    client.post(CLUSTERS, json=create_body(cluster_name="a", auto_scaled=False))
    assert len(admin.ignored_fields()) == 1
    admin.clear_ignored_fields()
    assert admin.ignored_fields() == []
    client.post(CLUSTERS, json=create_body(cluster_name="b", auto_scaled=False))
    admin.reset()
    assert admin.ignored_fields() == []


def test_requests_without_unknown_fields_are_not_recorded(http: Any, admin: Any) -> None:
    assert http().post(CLUSTERS, json=create_body()).status_code == 200
    assert admin.ignored_fields() == []


def test_the_model_says_what_it_ignored() -> None:
    request = ClusterCreateRequest.model_validate(create_body(auto_scaled=False))
    assert request.ignored_fields == ["auto_scaled"]
    assert ClusterCreateRequest.model_validate(create_body()).ignored_fields == []
