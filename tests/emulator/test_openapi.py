"""The emulator documents its public API (and only that) with its own models of the SDK's shapes."""

from __future__ import annotations

from typing import Any


def test_openapi_lists_public_paths(http: Any) -> None:
    doc = http(None).get("/openapi.json").json()
    paths = doc["paths"]
    assert set(paths) == {
        "/v1/compute/clusters",
        "/v1/compute/clusters/{cluster_id}",
        "/v1/compute/regions",
        "/v1/compute/clusters/storage/volumes",
        "/v1/compute/clusters/storage/volumes/{volume_id}",
        "/v1/compute/clusters/{cluster_id}/instances/{instance_id}/remediations",
        "/v1/compute/clusters/{cluster_id}/instances/{instance_id}/remediations/{remediation_id}",
        "/v1/compute/clusters/{cluster_id}/instances/{instance_id}/remediations/{remediation_id}/approve",
        "/v1/compute/clusters/{cluster_id}/instances/{instance_id}/remediations/{remediation_id}/reject",
        "/v1/compute/clusters/{cluster_id}/instances/{instance_id}/remediations/{remediation_id}/cancel",
        "/v3/whoami",
    }
    assert set(paths["/v1/compute/clusters/storage/volumes"]) == {"get", "post", "put"}
    assert set(paths["/v1/compute/clusters/storage/volumes/{volume_id}"]) == {"get", "delete"}
    assert set(paths["/v1/compute/clusters"]) == {"get", "post"}
    assert set(paths["/v1/compute/clusters/{cluster_id}"]) == {"get", "put", "delete"}
    remediations = "/v1/compute/clusters/{cluster_id}/instances/{instance_id}/remediations"
    assert set(paths[remediations]) == {"get", "post"}
    assert set(paths[f"{remediations}/{{remediation_id}}"]) == {"get"}
    schemas = doc["components"]["schemas"]
    for name in (
        "Cluster",
        "GPUWorkerNode",
        "ClusterCreateRequest",
        "ClusterUpdateRequest",
        "RegionList",
        "ClusterList",
        "ClusterDeleteResponse",
        "ErrorResponse",
        "WhoamiProjectAPIKey",
        "Remediation",
        "RemediationList",
        "RemediationCreateRequest",
    ):
        assert name in schemas, name
    ok = paths["/v1/compute/clusters"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["$ref"].endswith("/Cluster")
    assert "HTTPBearer" in doc["components"]["securitySchemes"]
    assert "422" not in paths["/v1/compute/clusters"]["post"]["responses"]
    assert "400" in paths["/v1/compute/clusters"]["post"]["responses"]


def test_healthz(http: Any) -> None:
    reply = http(None).get("/healthz")
    assert reply.status_code == 200 and reply.headers["x-request-id"]
