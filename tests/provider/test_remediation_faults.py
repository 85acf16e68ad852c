"""The remediation calls under every fault of the misbehaving proxy (tests/faultproxy.py, the kinds the cluster
campaign uses), judged on the emulator's own record, read directly, never through the proxy or the client's
answer: what the client reports is what the API did (an approval reported done is done, one reported failed
is not), and a fault never turns one repair into two.

issue 41, part 3: an approval lost on the wire is neither repeated into a second repair nor reported as done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from tests.faultproxy import Fault, FaultProxy
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.server import RunningEmulator
from together_clusters.provider import errors
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.models import ClusterCreateRequest, Remediation

KEY = "tgp_v1_remediation-faults-test-0123456789"

FAULTS = {
    "503": Fault("status", method="POST", status=503),
    "500": Fault("status", method="POST", status=500),
    "429": Fault("status", method="POST", status=429, retry_after="0"),
    "reset": Fault("reset", method="POST"),
    "drop": Fault("drop", method="POST"),
    "truncate": Fault("truncate", method="POST"),
    "delay": Fault("delay", method="POST", delay_s=0.2),
    "twice": Fault("twice", method="POST"),
}


@pytest.fixture
def admin(emu: RunningEmulator) -> Iterator[AdminClient]:
    emu.admin.reset()
    emu.admin.set_speed(0)
    yield emu.admin


@pytest.fixture
def proxy(emu: RunningEmulator) -> Iterator[FaultProxy]:
    with FaultProxy(emu.base_url) as running:
        yield running


@pytest.fixture
def truth(emu: RunningEmulator, admin: AdminClient) -> Iterator[TogetherClient]:
    """The API's record, read straight from the emulator."""
    with TogetherClient(api_key=KEY, base_url=emu.base_url, sleep=lambda _: None) as direct:
        yield direct


@pytest.fixture
def client(proxy: FaultProxy, admin: AdminClient) -> Iterator[TogetherClient]:
    with TogetherClient(api_key=KEY, base_url=proxy.url, sleep=lambda _: None) as through_proxy:
        yield through_proxy


def _instances(truth: TogetherClient, admin: AdminClient) -> tuple[str, list[str]]:
    made = truth.create_cluster(
        ClusterCreateRequest(
            cluster_name="repairs",
            region="us-central-8",
            gpu_type="H100_SXM",
            num_gpus=16,
            billing_type="ON_DEMAND",
            nvidia_version_id="nv-570-cu128-ubuntu2204",
        )
    )
    admin.advance(700)
    assert made.cluster_id is not None
    return made.cluster_id, [str(n.instance_id) for n in truth.get_cluster(made.cluster_id).gpu_worker_nodes]


def _outcome(call: Callable[[], Remediation]) -> Remediation | errors.TogetherError:
    try:
        return call()
    except errors.TogetherError as exc:  # every failure is one of the documented tree, never a raw one
        return exc


def _fault_on(proxy: FaultProxy, kind: str, path: str) -> None:
    proxy.add(replace(FAULTS[kind], path=path))


@pytest.mark.parametrize("kind", list(FAULTS))
def test_an_approval_is_reported_done_exactly_when_the_api_approved_it_and_never_twice(
    kind: str, client: TogetherClient, truth: TogetherClient, admin: AdminClient, proxy: FaultProxy
) -> None:
    cluster_id, (instance, _) = _instances(truth, admin)
    raised = admin.raise_remediation(cluster_id, instance)
    _fault_on(proxy, kind, f"/v1/compute/clusters/{cluster_id}/instances/{instance}/remediations/")

    got = _outcome(lambda: client.approve_remediation(cluster_id, instance, raised["id"], comment="drained"))

    record = truth.get_remediation(cluster_id, instance, raised["id"])
    approved = record.review_time is not None and record.state not in ("PENDING_APPROVAL", "CANCELLED")
    assert isinstance(got, Remediation) == approved, (kind, got, record.state)
    assert [r.id for r in truth.list_remediations(cluster_id, instance)] == [raised["id"]], "a second repair"
    if not approved:  # reported failed: the API did nothing, so approving again is safe and needed
        assert client.approve_remediation(cluster_id, instance, raised["id"]).review_time is not None


@pytest.mark.parametrize("kind", list(FAULTS))
def test_a_rejection_and_a_cancel_are_reported_done_exactly_when_the_api_did_them(
    kind: str, client: TogetherClient, truth: TogetherClient, admin: AdminClient, proxy: FaultProxy
) -> None:
    cluster_id, (first, second) = _instances(truth, admin)
    raised = admin.raise_remediation(cluster_id, first)
    _fault_on(proxy, kind, f"/v1/compute/clusters/{cluster_id}/instances/{first}/remediations/")
    got = _outcome(lambda: client.reject_remediation(cluster_id, first, raised["id"], comment="not now"))
    cancelled = truth.get_remediation(cluster_id, first, raised["id"]).state == "CANCELLED"
    assert isinstance(got, Remediation) == cancelled, (kind, got)

    pending = truth.create_remediation(cluster_id, second, "REMEDIATION_MODE_REBOOT_VM")
    _fault_on(proxy, kind, f"/v1/compute/clusters/{cluster_id}/instances/{second}/remediations/")
    got = _outcome(lambda: client.cancel_remediation(cluster_id, second, str(pending.id)))
    cancelled = truth.get_remediation(cluster_id, second, str(pending.id)).state == "CANCELLED"
    assert isinstance(got, Remediation) == cancelled, (kind, got)


@pytest.mark.parametrize("kind", list(FAULTS))
def test_a_requested_repair_is_made_at_most_once_and_reported_as_the_api_made_it(
    kind: str, client: TogetherClient, truth: TogetherClient, admin: AdminClient, proxy: FaultProxy
) -> None:
    cluster_id, (instance, _) = _instances(truth, admin)
    path = f"/v1/compute/clusters/{cluster_id}/instances/{instance}/remediations"
    _fault_on(proxy, kind, path)

    got = _outcome(lambda: client.create_remediation(cluster_id, instance, "REMEDIATION_MODE_VM_ONLY"))

    made = truth.list_remediations(cluster_id, instance)
    assert len(made) <= 1, f"{kind}: one request made {len(made)} repairs"
    if isinstance(got, Remediation):
        assert [r.id for r in made] == [got.id], kind
    else:
        # Reported failed: either nothing was made, or the one made is named in the error, so the user
        # neither asks again into a 409 blind nor believes there is no repair under way.
        assert made == [] or str(made[0].id) in str(got), (kind, got)
