"""Our API client's node remediation calls against the emulator over real HTTP: every call, the pages of a
listing followed to the end, the API's refusals mapped to our errors, and lost replies reconciled."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.remediations import RemediationTimings
from together_clusters.emulator.server import RunningEmulator
from together_clusters.provider import errors
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.models import ClusterCreateRequest

KEY = "tgp_v1_remediation-client-test-0123456789"
T = RemediationTimings()


class Counting(httpx.HTTPTransport):
    """A transport that counts the requests it sends, by method and path."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.method, request.url.path))
        return super().handle_request(request)


@pytest.fixture
def admin(emu: RunningEmulator) -> Iterator[AdminClient]:
    """The emulator reset, its clock frozen: the tests move it."""
    emu.admin.reset()
    emu.admin.set_speed(0)
    yield emu.admin
    emu.admin.clear_faults()


@pytest.fixture
def transport() -> Counting:
    return Counting()


@pytest.fixture
def client(emu: RunningEmulator, admin: AdminClient, transport: Counting) -> Iterator[TogetherClient]:
    with TogetherClient(api_key=KEY, base_url=emu.base_url, transport=transport, sleep=lambda _: None) as c:
        yield c


def _cluster(client: TogetherClient, admin: AdminClient, num_gpus: int = 16) -> tuple[str, list[str]]:
    made = client.create_cluster(
        ClusterCreateRequest(
            cluster_name="fixes",
            region="us-central-8",
            gpu_type="H100_SXM",
            num_gpus=num_gpus,
            billing_type="ON_DEMAND",
            nvidia_version_id="nv-570-cu128-ubuntu2204",
        )
    )
    admin.advance(700)
    assert made.cluster_id is not None
    nodes = client.get_cluster(made.cluster_id).gpu_worker_nodes
    return made.cluster_id, [str(n.instance_id) for n in nodes]


def test_every_call_and_the_errors_it_maps(client: TogetherClient, admin: AdminClient) -> None:
    cluster_id, (first, second) = _cluster(client, admin)
    made = client.create_remediation(cluster_id, first, "REMEDIATION_MODE_VM_ONLY", reason="ECC")
    assert (made.state, made.trigger, made.reason) == ("PENDING", "REMEDIATION_TRIGGER_MANUAL", "ECC")
    assert made.create_time is not None and made.update_time is not None and made.requested_by
    assert [r.id for r in client.list_remediations(cluster_id)] == [made.id]
    assert [r.id for r in client.list_remediations(cluster_id, first, states=["PENDING", "RUNNING"])] == [
        made.id
    ]
    assert client.list_remediations(cluster_id, second) == []
    assert client.get_remediation(cluster_id, first, made.id).state == "PENDING"

    with pytest.raises(errors.ConflictError) as second_one:
        client.create_remediation(cluster_id, first, "REMEDIATION_MODE_REBOOT_VM")
    assert second_one.value.status_code == 409 and second_one.value.param == "instance_id"
    with pytest.raises(errors.NotFoundError):
        client.create_remediation(cluster_id, "i-nope", "REMEDIATION_MODE_REBOOT_VM")
    with pytest.raises(errors.NotFoundError):
        client.get_remediation(cluster_id, first, "r-nope")
    with pytest.raises(errors.ConflictError):
        client.approve_remediation(cluster_id, first, str(made.id))

    cancelled = client.cancel_remediation(cluster_id, first, str(made.id))
    assert cancelled.state == "CANCELLED" and cancelled.end_time is not None

    raised = admin.raise_remediation(cluster_id, second)
    with pytest.raises(errors.ValidationError) as override:
        client.approve_remediation(cluster_id, second, raised["id"], mode="REMEDIATION_MODE_HOST_POWER_CYCLE")
    assert override.value.param == "mode"
    approved = client.approve_remediation(
        cluster_id, second, raised["id"], comment="drained", mode="REMEDIATION_MODE_REBOOT_VM"
    )
    assert (approved.state, approved.mode, approved.review_comment) == (
        "PENDING",
        "REMEDIATION_MODE_REBOOT_VM",
        "drained",
    )
    assert approved.reviewed_by and approved.review_time is not None and approved.linked_alerts
    admin.advance(T.pending_s)
    with pytest.raises(errors.ConflictError):
        client.cancel_remediation(cluster_id, second, raised["id"])
    node = next(n for n in client.get_cluster(cluster_id).gpu_worker_nodes if n.instance_id == second)
    assert node.latest_remediation is not None and node.latest_remediation.state == "RUNNING"
    assert node.auto_remediation_enabled is False

    rejectable = admin.raise_remediation(cluster_id, first)
    rejected = client.reject_remediation(cluster_id, first, rejectable["id"], comment="not now")
    assert (rejected.state, rejected.review_comment) == ("CANCELLED", "not now")
    with pytest.raises(ValueError):
        client.get_remediation(cluster_id, "a/b", "x")


def test_a_listing_is_followed_page_by_page(
    client: TogetherClient, admin: AdminClient, transport: Counting
) -> None:
    cluster_id, (instance, _) = _cluster(client, admin)
    made = []
    for _ in range(7):
        rem = client.create_remediation(cluster_id, instance, "REMEDIATION_MODE_REBOOT_VM")
        client.cancel_remediation(cluster_id, instance, str(rem.id))
        made.append(rem.id)
    transport.sent.clear()
    listed = client.list_remediations(cluster_id, states=["CANCELLED"], page_size=2)
    assert [r.id for r in listed] == made[::-1]
    assert len(transport.sent) == 4  # pages of 2, 2, 2 and 1
    page = client.list_remediations_page(cluster_id, page_size=3, triggers=["REMEDIATION_TRIGGER_MANUAL"])
    assert page.has_next and len(page.remediations) == 3
    rest = client.list_remediations_page(
        cluster_id, page_size=10, triggers=["REMEDIATION_TRIGGER_MANUAL"], page_token=page.next_page_token
    )
    assert not rest.has_next and rest.next_page_token == ""
    assert [r.id for r in page.remediations + rest.remediations] == made[::-1]


def test_a_lost_reply_is_reconciled_not_sent_again(
    client: TogetherClient, admin: AdminClient, transport: Counting
) -> None:
    cluster_id, (instance, other) = _cluster(client, admin)
    path = f"/v1/compute/clusters/{cluster_id}/instances/{instance}/remediations"
    # The create takes effect, then the connection drops: the client finds it among the active ones.
    admin.drop_reply(method="POST", path=path)
    made = client.create_remediation(cluster_id, instance, "REMEDIATION_MODE_VM_ONLY")
    assert made.state == "PENDING"
    assert [r.id for r in client.list_remediations(cluster_id)] == [made.id]
    assert [m for m, p in transport.sent if m == "POST" and p == path] == ["POST"]

    # An approval whose reply is lost: read back, it shows approved.
    raised = admin.raise_remediation(cluster_id, other)
    admin.drop_reply(method="POST", path=f"/v1/compute/clusters/{cluster_id}/instances/{other}/remediations")
    approved = client.approve_remediation(cluster_id, other, raised["id"], comment="ok")
    assert approved.state == "PENDING" and approved.review_comment == "ok"

    # A 429 is retried (it was refused before anything happened); a 500 on a cancel that did not take
    # effect is no success.
    admin.add_fault(429, method="POST", path=f"{path}/{made.id}/cancel", retry_after=0)
    assert client.cancel_remediation(cluster_id, instance, str(made.id)).state == "CANCELLED"
    again = client.create_remediation(cluster_id, instance, "REMEDIATION_MODE_REBOOT_VM")
    admin.add_fault(500, method="POST", path=f"{path}/{again.id}/cancel")
    with pytest.raises(errors.ServerError):
        client.cancel_remediation(cluster_id, instance, str(again.id))
    assert client.get_remediation(cluster_id, instance, str(again.id)).state == "PENDING"
