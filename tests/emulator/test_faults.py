"""Injected HTTP faults: status + Retry-After, delays, and replies lost after the change was made."""

from __future__ import annotations

import time
from typing import Any

import pytest
import together

from .conftest import create_body


def test_injected_503_with_retry_after(http: Any, admin: Any) -> None:
    admin.add_fault(503, count=2, path="/v1/compute/clusters", method="GET", retry_after=7)
    client = http()
    for _ in range(2):
        reply = client.get("/v1/compute/clusters")
        assert reply.status_code == 503
        assert reply.headers["retry-after"] == "7"
        assert reply.headers["x-request-id"]
        assert reply.json()["error"]["type"] == "server_error"
    assert client.get("/v1/compute/clusters").status_code == 200
    # Faults only hit matching requests, and never the admin API.
    admin.add_fault(429, path="/v1/compute/regions")
    assert client.get("/v1/compute/clusters").status_code == 200
    assert admin.clusters() == []
    limited = client.get("/v1/compute/regions")
    assert limited.status_code == 429 and limited.json()["error"]["type"] == "rate_limit"


def test_sdk_retries_an_injected_503(sdk: Any, admin: Any) -> None:
    admin.add_fault(503, count=1, method="GET", retry_after=0.01)
    assert sdk(max_retries=2).clusters.list().clusters == []
    admin.add_fault(503, count=1, method="GET")
    with pytest.raises(together.InternalServerError):
        sdk(max_retries=0).clusters.list()


def test_after_commit_applies_the_create_and_fails_the_reply(sdk: Any, admin: Any) -> None:
    admin.add_fault(502, method="POST", path="/v1/compute/clusters", after_commit=True)
    client = sdk()
    with pytest.raises(together.APIStatusError) as err:
        client.clusters.create(**create_body(cluster_name="lost-reply"))
    assert err.value.status_code == 502
    [cluster] = client.clusters.list().clusters
    assert cluster.cluster_name == "lost-reply"
    # A blind retry now conflicts: the lost reply's create did happen.
    with pytest.raises(together.ConflictError):
        client.clusters.create(**create_body(cluster_name="lost-reply"))


def test_delay_fault(http: Any, admin: Any) -> None:
    admin.add_fault(None, delay_s=0.3, path="/v1/compute/regions")
    started = time.monotonic()
    reply = http().get("/v1/compute/regions")
    assert reply.status_code == 200 and time.monotonic() - started >= 0.3


def test_fault_admin_validation(http: Any) -> None:
    raw = http(None)
    assert raw.post("/_emulator/faults", json={"count": 1}).status_code == 400
    assert raw.post("/_emulator/faults", json={"status": 200}).status_code == 400
    added = raw.post("/_emulator/faults", json={"status": 500, "count": 3}).json()
    assert added["count"] == 3 and added["path"] == "/v1/"
    assert [f["id"] for f in raw.get("/_emulator/faults").json()["faults"]] == [added["id"]]
    raw.delete("/_emulator/faults")
    assert raw.get("/_emulator/faults").json()["faults"] == []
