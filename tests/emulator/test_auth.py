"""Bearer auth, per-key isolation and the error/request-id envelope."""

from __future__ import annotations

from typing import Any

import pytest
import together

from .conftest import create_body


@pytest.mark.parametrize("api_key", [None, ""])
def test_missing_or_empty_key_is_401(http: Any, api_key: str | None) -> None:
    for method, path in [
        ("GET", "/v1/compute/clusters"),
        ("GET", "/v1/compute/regions"),
        ("POST", "/v1/compute/clusters"),
    ]:
        reply = http(api_key).request(method, path, json=create_body() if method == "POST" else None)
        assert reply.status_code == 401
        assert reply.json()["error"]["type"] == "authentication_error"
        assert reply.headers["x-request-id"]


def test_other_schemes_are_401_and_sdk_maps_it(emu: Any) -> None:
    headers = {"Authorization": "Basic a2V5OnNlY3JldA=="}
    with together.Together(
        api_key="k", base_url=emu.base_url, max_retries=0, default_headers=headers
    ) as client:
        with pytest.raises(together.AuthenticationError) as err:
            client.clusters.list()
    assert "a2V5" not in str(err.value)


def test_keys_are_isolated(sdk: Any, http: Any, admin: Any) -> None:
    alice, bob = sdk("key-alice"), sdk("key-bob")
    mine = alice.clusters.create(**create_body(cluster_name="shared-name"))
    # Names are per owner: bob may use the same one.
    theirs = bob.clusters.create(**create_body(cluster_name="shared-name"))
    assert mine.project_id != theirs.project_id
    assert [c.cluster_id for c in alice.clusters.list().clusters] == [mine.cluster_id]
    assert [c.cluster_id for c in bob.clusters.list().clusters] == [theirs.cluster_id]
    for call in (
        lambda: bob.clusters.retrieve(mine.cluster_id),
        lambda: bob.clusters.update(mine.cluster_id, num_gpus=16),
        lambda: bob.clusters.delete(mine.cluster_id),
    ):
        with pytest.raises(together.NotFoundError):
            call()
    assert alice.clusters.retrieve(mine.cluster_id).num_gpus == 8
    assert len(admin.clusters()) == 2
    raw = http("key-bob").get(f"/v1/compute/clusters/{mine.cluster_id}")
    assert raw.status_code == 404 and raw.json()["error"]["type"] == "not_found"


def test_project_id_given_or_derived_and_list_filter(sdk: Any) -> None:
    client = sdk("secret-key-123")
    derived = client.clusters.create(**create_body(cluster_name="a"))
    given = client.clusters.create(**create_body(cluster_name="b", project_id="proj-team"))
    assert given.project_id == "proj-team"
    assert derived.project_id.startswith("proj-") and "secret" not in derived.project_id
    assert [c.cluster_name for c in client.clusters.list(project_id="proj-team").clusters] == ["b"]


def test_duplicate_live_name_is_409_and_not_retried(sdk: Any, http: Any) -> None:
    client = sdk(max_retries=2)
    first = client.clusters.create(**create_body(cluster_name="dup"))
    with pytest.raises(together.ConflictError) as err:
        client.clusters.create(**create_body(cluster_name="dup"))
    assert "cluster_name" in str(err.value)
    reply = http().post("/v1/compute/clusters", json=create_body(cluster_name="dup"))
    assert reply.status_code == 409 and reply.headers["x-should-retry"] == "false"
    assert reply.json()["error"] == {
        "message": reply.json()["error"]["message"],
        "type": "conflict",
        "param": "cluster_name",
    }
    # Once the first one is being deleted the name is free again.
    client.clusters.delete(first.cluster_id)
    assert client.clusters.create(**create_body(cluster_name="dup")).cluster_name == "dup"


def test_unknown_cluster_and_route(http: Any) -> None:
    client = http()
    for method in ("GET", "PUT", "DELETE"):
        reply = client.request(method, "/v1/compute/clusters/nope", json={} if method == "PUT" else None)
        assert reply.status_code == 404, method
        assert reply.json()["error"]["type"] == "not_found"
    reply = client.get("/v1/compute/nothing-here")
    assert reply.status_code == 404 and reply.json()["error"]["type"] == "not_found"
    assert reply.headers["x-request-id"]


def test_an_emulator_bug_is_a_500_with_the_envelope_and_a_request_id(
    http: Any, emu: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(emu.platform, "list_regions", broken)
    reply = http().get("/v1/compute/regions")
    assert reply.status_code == 500 and reply.headers["x-request-id"]
    assert reply.json()["error"] == {
        "message": "internal emulator error: RuntimeError",
        "type": "server_error",
        "param": None,
    }
    # The connection and the server carry on.
    assert http().get("/v1/compute/clusters").status_code == 200
