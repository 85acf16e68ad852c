"""``GET /v3/whoami``: every API key is a project API key of its own project and organization."""

from __future__ import annotations

from typing import Any

import pytest
import together
from together.types import WhoamiProjectAPIKey

from .conftest import create_body
from .strict import strict_whoami


def test_whoami_names_the_keys_project_as_its_clusters_do(sdk: Any, http: Any) -> None:
    client: together.Together = sdk("key-alice")
    raw = client.with_raw_response.whoami()
    me = strict_whoami(raw.http_response.text)
    assert isinstance(raw.parse(), WhoamiProjectAPIKey)
    assert me.type == "project_api_key"
    assert "key-alice" not in raw.http_response.text
    cluster = client.clusters.create(**create_body())
    assert cluster.project_id == me.project.id
    assert [c.cluster_id for c in client.clusters.list(project_id=me.project.id).clusters] == [
        cluster.cluster_id
    ]
    # The same key is the same identity on every call; another key is another project and organization.
    assert strict_whoami(http("key-alice").get("/v3/whoami").text) == me
    other = strict_whoami(http("key-bob").get("/v3/whoami").text)
    assert other.project.id != me.project.id
    assert other.organization.id != me.organization.id
    assert other.api_key.id != me.api_key.id


def test_whoami_project_slug_is_dns_friendly(http: Any) -> None:
    me = strict_whoami(http("Some Key/With+Odd=Chars").get("/v3/whoami").text)
    slug = me.project.slug
    assert slug and slug == slug.lower() and all(c.isalnum() or c == "-" for c in slug)


@pytest.mark.parametrize("api_key", [None, ""])
def test_whoami_without_a_key_is_401(http: Any, api_key: str | None) -> None:
    reply = http(api_key).get("/v3/whoami")
    assert reply.status_code == 401
    assert reply.json()["error"]["type"] == "authentication_error"
