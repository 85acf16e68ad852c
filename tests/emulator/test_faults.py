"""Injected HTTP faults over real HTTP: status + Retry-After, slow commits and replies, replies lost, cut or
garbled after the change was made, a lagging listing, and the duplicate-name modes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
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


def _names(admin: Any) -> list[str]:
    return [c["cluster_name"] for c in admin.clusters()]


def _eventually(what: str, check: Callable[[], bool]) -> None:
    """Wait (bounded, never asserting on time) until ``check()`` holds."""
    for _ in range(300):
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("mode", ["truncated", "invalid_json"])
def test_unreadable_reply_after_commit(http: Any, admin: Any, mode: str) -> None:
    admin.unreadable_reply(mode, method="POST", path="/v1/compute/clusters")
    reply = http().post("/v1/compute/clusters", json=create_body(cluster_name="garbled"))
    assert reply.status_code == 200 and reply.headers["x-request-id"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(reply.text)
    assert _names(admin) == ["garbled"]
    # The next request is served normally.
    assert http().get("/v1/compute/clusters").json()["clusters"][0]["cluster_name"] == "garbled"


def test_unreadable_reply_through_the_sdk(sdk: Any, admin: Any) -> None:
    admin.unreadable_reply("truncated", method="POST", path="/v1/compute/clusters")
    with pytest.raises((together.APIError, json.JSONDecodeError)):
        sdk().clusters.create(**create_body(cluster_name="sdk-garbled"))
    assert _names(admin) == ["sdk-garbled"]


def test_patched_reply_after_commit(http: Any, admin: Any) -> None:
    # A reply a client's models may not expect: an enum value from a later release, a field set to null.
    admin.unreadable_reply(
        "patch",
        method="POST",
        path="/v1/compute/clusters",
        patch={"status": "Hibernating", "kube_config": None},
    )
    reply = http().post("/v1/compute/clusters", json=create_body(cluster_name="odd"))
    assert reply.status_code == 200
    body = reply.json()
    assert body["status"] == "Hibernating" and body["kube_config"] is None and body["cluster_name"] == "odd"
    [live] = admin.clusters()
    assert live["status"] == "WaitingForControlPlaneNodes" and live["kube_config"]


def test_commit_then_drop_the_connection(http: Any, sdk: Any, admin: Any) -> None:
    admin.drop_reply(method="POST", path="/v1/compute/clusters")
    with pytest.raises(httpx.TransportError):
        http().post("/v1/compute/clusters", json=create_body(cluster_name="dropped"))
    assert _names(admin) == ["dropped"]
    admin.drop_reply(method="DELETE", count=1)
    cluster_id = admin.clusters()[0]["cluster_id"]
    with pytest.raises(together.APIConnectionError):
        sdk(max_retries=0).clusters.delete(cluster_id)
    assert admin.clusters()[0]["status"] == "Deleting"


def test_connection_reset_before_the_request_takes_effect(http: Any, sdk: Any, admin: Any) -> None:
    admin.reset_connection(method="POST", path="/v1/compute/clusters", count=2)
    with pytest.raises(httpx.TransportError):
        http().post("/v1/compute/clusters", json=create_body(cluster_name="never"))
    with pytest.raises(together.APIConnectionError):
        sdk(max_retries=0).clusters.create(**create_body(cluster_name="never"))
    assert _names(admin) == []
    assert http().post("/v1/compute/clusters", json=create_body(cluster_name="never")).status_code == 200


def test_slow_commit_takes_effect_after_the_client_gave_up(http: Any, admin: Any) -> None:
    admin.slow_commit(3.0, method="POST", path="/v1/compute/clusters")
    with pytest.raises(httpx.ReadTimeout):
        http(timeout=0.5).post("/v1/compute/clusters", json=create_body(cluster_name="slow"))
    _eventually("the slow create to take effect", lambda: _names(admin) == ["slow"])


def test_slow_reply_after_an_immediate_commit(http: Any, admin: Any) -> None:
    admin.slow_reply(30.0, method="POST", path="/v1/compute/clusters")
    with pytest.raises(httpx.ReadTimeout):
        http(timeout=2).post("/v1/compute/clusters", json=create_body(cluster_name="slow-reply"))
    assert _names(admin) == ["slow-reply"]


def test_lagging_listing_hides_new_clusters_for_a_while(sdk: Any, admin: Any) -> None:
    client = sdk()
    old = client.clusters.create(**create_body(cluster_name="old"))
    admin.advance(600)
    assert admin.settings(list_lag_s=120)["list_lag_s"] == 120
    new = client.clusters.create(**create_body(cluster_name="new"))
    assert [c.cluster_id for c in client.clusters.list().clusters] == [old.cluster_id]
    # Read by id, the new cluster is there at once.
    assert client.clusters.retrieve(new.cluster_id).cluster_name == "new"
    admin.advance(119)
    assert [c.cluster_id for c in client.clusters.list().clusters] == [old.cluster_id]
    admin.advance(1)
    assert [c.cluster_id for c in client.clusters.list().clusters] == [old.cluster_id, new.cluster_id]


def test_duplicate_name_modes(sdk: Any, admin: Any) -> None:
    client = sdk()
    assert admin.settings()["unique_names"] is True
    first = client.clusters.create(**create_body(cluster_name="twin"))
    with pytest.raises(together.ConflictError):
        client.clusters.create(**create_body(cluster_name="twin"))
    admin.settings(unique_names=False)
    second = client.clusters.create(**create_body(cluster_name="twin"))
    assert second.cluster_id != first.cluster_id
    assert sorted(c.cluster_id for c in client.clusters.list().clusters) == sorted(
        [first.cluster_id, second.cluster_id]
    )
    # A reset restores the defaults: unique names, no lag (and the remediations' default timings).
    admin.reset()
    settings = admin.settings()
    assert settings.pop("remediation_timings")["pending_s"] == 60.0
    assert settings == {"grace_seconds": 300.0, "list_lag_s": 0.0, "unique_names": True}


def test_fault_admin_validation(http: Any) -> None:
    raw = http(None)
    assert raw.post("/_emulator/faults", json={"count": 1}).status_code == 400
    assert raw.post("/_emulator/faults", json={"status": 200}).status_code == 400
    assert raw.post("/_emulator/faults", json={"reply": "drop", "status": 502}).status_code == 400
    assert raw.post("/_emulator/faults", json={"reply": "patch"}).status_code == 400
    assert raw.post("/_emulator/faults", json={"reply": "truncated", "patch": {"a": 1}}).status_code == 400
    added = raw.post("/_emulator/faults", json={"status": 500, "count": 3}).json()
    assert added["count"] == 3 and added["path"] == "/v1/"
    assert [f["id"] for f in raw.get("/_emulator/faults").json()["faults"]] == [added["id"]]
    raw.delete("/_emulator/faults")
    assert raw.get("/_emulator/faults").json()["faults"] == []
