"""Our API client against the emulator over real HTTP on 127.0.0.1."""

from __future__ import annotations

import logging
import socket

import httpx
import pytest

from together_clusters.provider import errors
from together_clusters.provider.client import TogetherClient, resolve_base_url
from together_clusters.provider.models import ClusterCreateRequest, ClusterUpdateRequest
from together_clusters.provider.retry import RetryPolicy

SECRET_KEY = "tgp_v1_client-test-secret-0123456789abcdef"


@pytest.fixture
def admin(emu):
    emu.admin.reset()
    yield emu.admin
    emu.admin.clear_faults()


class Sleeps(list):
    """Records the waits instead of sleeping, so retry timing is observable and fast."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps():
    return Sleeps()


@pytest.fixture
def client(emu, admin, sleeps):
    with TogetherClient(api_key=SECRET_KEY, base_url=emu.base_url, sleep=sleeps) as c:
        yield c


def request(name: str = "alpha", **overrides) -> ClusterCreateRequest:
    body = {
        "cluster_name": name,
        "region": "us-central-8",
        "gpu_type": "H100_SXM",
        "num_gpus": 8,
        "num_preemptible_gpus": 8,
        "billing_type": "ON_DEMAND",
        "nvidia_version_id": "nv-570-cu128-ubuntu2204",
    }
    return ClusterCreateRequest.model_validate(body | overrides)


def test_every_endpoint_round_trip(client, admin):
    regions = {r.name: r for r in client.list_regions()}
    assert "H100_SXM" in regions["us-central-8"].supported_instance_types

    created = client.create_cluster(request())
    assert created.cluster_name == "alpha"
    assert created.desired_preemptible_gpus == 8
    assert client.get_cluster(created.cluster_id).cluster_id == created.cluster_id
    assert [c.cluster_id for c in client.list_clusters()] == [created.cluster_id]

    updated = client.update_cluster(created.cluster_id, ClusterUpdateRequest(num_preemptible_gpus=16))
    assert updated.desired_preemptible_gpus == 16
    assert updated.num_gpus == 8  # left out of the PUT, so kept

    assert client.delete_cluster(created.cluster_id).cluster_id == created.cluster_id
    admin.advance(3600)
    with pytest.raises(errors.NotFoundError) as caught:
        client.get_cluster(created.cluster_id)
    assert caught.value.status_code == 404
    assert caught.value.request_id


def test_validation_errors_name_the_field(client):
    with pytest.raises(errors.ValidationError) as caught:
        client.create_cluster(request(num_gpus=4, num_preemptible_gpus=16))
    assert caught.value.status_code == 400
    assert "num_gpus" in caught.value.message
    assert "num_gpus" in str(caught.value)
    assert caught.value.request_id

    with pytest.raises(errors.ValidationError) as caught:
        client.create_cluster(request(num_preemptible_gpus=12))
    assert "num_preemptible_gpus" in caught.value.message

    with pytest.raises(errors.ValidationError) as caught:
        client.create_cluster(request(region="mars-1"))
    assert "region" in caught.value.message


def test_name_collision_is_a_conflict(client):
    client.create_cluster(request("twin"))
    with pytest.raises(errors.ConflictError) as caught:
        client.create_cluster(request("twin"))
    assert caught.value.status_code == 409


@pytest.mark.parametrize("status", [429, 503])
def test_reads_retry_through_injected_faults_honouring_retry_after(client, admin, sleeps, status):
    cluster = client.create_cluster(request())
    admin.add_fault(status=status, count=2, method="GET", path="/v1/compute/clusters/", retry_after=2)
    assert client.get_cluster(cluster.cluster_id).cluster_id == cluster.cluster_id
    assert sleeps == [2.0, 2.0]


def test_put_and_delete_retry_with_backoff_when_no_hint(client, admin, sleeps):
    cluster = client.create_cluster(request())
    admin.add_fault(status=502, count=1, method="PUT")
    admin.add_fault(status=504, count=1, method="DELETE")
    client.update_cluster(cluster.cluster_id, ClusterUpdateRequest(num_preemptible_gpus=0))
    client.delete_cluster(cluster.cluster_id)
    assert len(sleeps) == 2
    assert all(0 < s <= RetryPolicy().initial_backoff for s in sleeps)


def test_retries_give_up_with_the_status_and_message(client, admin, sleeps):
    admin.add_fault(status=503, count=10, method="GET")
    policy_attempts = client.retry.max_attempts
    with pytest.raises(errors.ServerError) as caught:
        client.list_clusters()
    assert caught.value.status_code == 503
    assert caught.value.message
    assert len(sleeps) == policy_attempts - 1


def test_lost_create_reply_does_not_make_a_second_cluster(client, admin):
    admin.add_fault(status=502, count=1, method="POST", path="/v1/compute/clusters", after_commit=True)
    cluster = client.create_cluster(request("lost-reply"))
    named = [c for c in admin.clusters() if c["cluster_name"] == "lost-reply"]
    assert [c["cluster_id"] for c in named] == [cluster.cluster_id]


def test_a_429_is_sent_again_but_a_5xx_is_reconciled_never_re_sent(client, admin):
    """A 429 is a refusal before any work; a 503 may or may not have been taken: never POST again."""
    admin.add_fault(status=429, count=1, method="POST", path="/v1/compute/clusters", retry_after=1)
    client.create_cluster(request("refused-first"))
    assert len([c for c in admin.clusters() if c["cluster_name"] == "refused-first"]) == 1
    admin.add_fault(status=503, count=1, method="POST", path="/v1/compute/clusters")
    with pytest.raises(errors.AmbiguousCreateError) as caught:
        client.create_cluster(request("refused-second"), reconcile_timeout_s=1)
    assert "'refused-second'" in str(caught.value) and "tg clusters list" in str(caught.value)
    assert [c for c in admin.clusters() if c["cluster_name"] == "refused-second"] == []


def test_lost_reply_does_not_adopt_an_older_cluster_of_the_same_name(client, admin):
    """A cluster that existed before the call is not taken for the one this call made."""
    older = client.create_cluster(request("same-name"))
    admin.add_fault(status=502, count=1, method="POST", path="/v1/compute/clusters", after_commit=False)
    with pytest.raises(errors.AmbiguousCreateError):
        client.create_cluster(request("same-name"), reconcile_timeout_s=1)
    assert [c["cluster_id"] for c in admin.clusters() if c["cluster_name"] == "same-name"] == [
        older.cluster_id
    ]


def test_401_without_a_key(emu, monkeypatch):
    reply = httpx.get(f"{emu.base_url}/v1/compute/clusters")
    assert reply.status_code == 401
    monkeypatch.delenv("TOGETHER_API_KEY", raising=False)
    with pytest.raises(errors.ConfigurationError) as caught:
        TogetherClient(base_url=emu.base_url)
    assert "TOGETHER_API_KEY" in str(caught.value)


def test_401_reply_maps_to_authentication_error(client, admin):
    admin.add_fault(status=401, count=1, method="GET")
    with pytest.raises(errors.AuthenticationError) as caught:
        client.list_clusters()
    assert caught.value.status_code == 401


def test_keys_are_separate_projects(emu, admin):
    with (
        TogetherClient(api_key="key-one", base_url=emu.base_url) as one,
        TogetherClient(api_key="key-two", base_url=emu.base_url) as two,
    ):
        mine = one.create_cluster(request("mine"))
        assert two.list_clusters() == []
        with pytest.raises(errors.NotFoundError):
            two.get_cluster(mine.cluster_id)


def test_connection_errors_retry_then_raise_transport_error(sleeps):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with TogetherClient(api_key=SECRET_KEY, base_url=f"http://127.0.0.1:{port}", sleep=sleeps) as c:
        with pytest.raises(errors.TransportError) as caught:
            c.list_regions()
    assert len(sleeps) == c.retry.max_attempts - 1
    assert SECRET_KEY not in str(caught.value)


def test_the_key_never_appears_in_errors_reprs_or_logs(client, admin, caplog, emu):
    caplog.set_level(logging.DEBUG)
    seen: list[str] = [repr(client), str(client.__dict__)]
    for fault in (400, 401, 404, 409, 500):
        admin.add_fault(status=fault, count=10, method="GET")
        with pytest.raises(errors.APIError) as caught:
            client.list_clusters()
        seen += [str(caught.value), repr(caught.value), str(caught.value.__dict__)]
        admin.clear_faults()
    seen.append(caplog.text)
    assert all(SECRET_KEY not in text for text in seen)


def test_base_url_convention():
    assert resolve_base_url("https://api.together.ai/v1/") == "https://api.together.ai"
    assert resolve_base_url("http://127.0.0.1:9") == "http://127.0.0.1:9"
    with pytest.raises(errors.ConfigurationError) as caught:
        resolve_base_url("api.together.ai")
    assert "TOGETHER_BASE_URL" in str(caught.value)
