"""The dynamic provider under faults a real network and API produce, over real HTTP through a misbehaving
proxy (tests/faultproxy.py) in front of the emulator, called the way the engine calls it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.faultproxy import Fault, FaultProxy
from together_clusters.emulator.server import RunningEmulator, start_emulator
from together_clusters.provider import settings
from together_clusters.provider.errors import WrongTargetError
from together_clusters.provider.models import Cluster
from together_clusters.provider.resource import ClusterProvider, forget_catalog

from .conftest import cluster_inputs

KEY = "fault-test-key-0123456789"
CLUSTERS = "/v1/compute/clusters"


@pytest.fixture
def proxy(emu: RunningEmulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    emu.admin.reset()
    emu.admin.set_speed(600)
    with FaultProxy(emu.base_url) as running:
        running.stale_headers = {"Authorization": f"Bearer {KEY}"}
        monkeypatch.setenv("TOGETHER_BASE_URL", running.url)
        monkeypatch.setenv("TOGETHER_API_KEY", KEY)
        monkeypatch.setenv("TOGETHER_RECONCILE_TIMEOUT_S", "20")
        settings.forget_clients()
        forget_catalog()
        yield running
        settings.forget_clients()
    emu.admin.clear_faults()


def inputs(**overrides: Any) -> dict[str, Any]:
    return cluster_inputs("faulty", **overrides)


def live(emu: RunningEmulator) -> list[dict[str, Any]]:
    return [c for c in emu.admin.clusters() if c.get("status") != "Deleting"]


# --- point 1 and 4: a create whose reply is lost or unreadable ends with the cluster tracked -------


@pytest.mark.parametrize("kind", ["truncate", "drop"])
def test_a_lost_or_unreadable_create_reply_still_tracks_the_one_cluster(proxy, emu, kind):
    proxy.add(Fault(kind, method="POST", path=CLUSTERS))
    created = ClusterProvider().create(inputs(cluster_name=f"lost-{kind}"))
    (cluster,) = live(emu)
    assert created.id == cluster["cluster_id"]
    assert created.outs["status"] == "Ready"
    assert proxy.requests.count(("POST", CLUSTERS)) == 1


def test_a_reset_before_the_post_arrives_is_not_re_sent_and_says_what_to_check(proxy, emu):
    proxy.add(Fault("reset", method="POST", path=CLUSTERS))
    settings.forget_clients()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOGETHER_RECONCILE_TIMEOUT_S", "2")
        with pytest.raises(Exception) as caught:
            ClusterProvider().create(inputs(cluster_name="never-made"))
    assert "'never-made'" in str(caught.value) and "tg clusters list" in str(caught.value)
    assert live(emu) == []
    assert proxy.requests.count(("POST", CLUSTERS)) == 1


def test_a_listing_that_lags_behind_the_lost_create_is_asked_again(proxy, emu):
    proxy.add(Fault("stale", method="GET", path=CLUSTERS, count=3))
    proxy.add(Fault("drop", method="POST", path=CLUSTERS))
    created = ClusterProvider().create(inputs(cluster_name="lagging"))
    assert [c["cluster_id"] for c in live(emu)] == [created.id]


def test_a_409_for_a_name_that_was_free_is_this_calls_own_cluster(proxy, emu):
    """Something on the way sent the POST twice: the 409 of the second is about our own cluster."""
    proxy.add(Fault("twice", method="POST", path=CLUSTERS))
    created = ClusterProvider().create(inputs(cluster_name="sent-twice"))
    assert [c["cluster_id"] for c in live(emu)] == [created.id]


def test_lenient_replies_like_the_sdk():
    """Unknown enum values are kept, optional fields may be missing, kube_config may be null."""
    cluster = Cluster.model_validate(
        {
            "cluster_id": "c-1",
            "cluster_name": "x",
            "status": "SomeNewStatus",
            "billing_type": "NEW_BILLING",
            "gpu_type": "Z100_SXM",
            "kube_config": None,
            "gpu_worker_nodes": None,
            "phase_transitions": [{"phase": "CLUSTER_PHASE_NEW", "transition_time": "2026-01-01T00:00:00Z"}],
        }
    )
    assert cluster.status == "SomeNewStatus" and cluster.gpu_type == "Z100_SXM"
    assert cluster.kube_config is None and cluster.gpu_worker_nodes == []
    assert cluster.latest_phase == "CLUSTER_PHASE_NEW"


# --- point 3: transient errors while waiting do not delete a healthy cluster ---------------------


def test_a_5xx_and_429_storm_while_waiting_for_ready_keeps_the_cluster(proxy, emu):
    # The wait's polls are single tries: it rides storms out at its own pace.
    proxy.add(Fault("status", method="GET", path=CLUSTERS + "/", status=500, count=3))
    proxy.add(Fault("status", method="GET", path=CLUSTERS + "/", status=429, retry_after="nan", count=3))
    proxy.add(Fault("reset", method="GET", path=CLUSTERS + "/", count=2))
    created = ClusterProvider().create(inputs(cluster_name="stormy"))
    assert [c["cluster_id"] for c in live(emu)] == [created.id]
    assert created.outs["status"] == "Ready"
    assert proxy.injected["status"] == 6


# --- point 2: identity ------------------------------------------------------------------------


def test_state_records_endpoint_and_project_and_refuses_another(proxy, emu, monkeypatch):
    provider = ClusterProvider()
    created = provider.create(inputs(cluster_name="mine"))
    assert created.outs["api_endpoint"] == proxy.url
    assert created.outs["api_project_id"]
    outs = created.outs

    monkeypatch.setenv("TOGETHER_API_KEY", "another-projects-key")
    with pytest.raises(WrongTargetError) as caught:
        provider.read(created.id, outs)
    assert "project" in str(caught.value) and "another-projects-key" not in str(caught.value)
    with pytest.raises(WrongTargetError):
        provider.delete(created.id, outs)

    monkeypatch.setenv("TOGETHER_API_KEY", KEY)
    with start_emulator(speed=600) as elsewhere:
        monkeypatch.setenv("TOGETHER_BASE_URL", elsewhere.base_url)
        with pytest.raises(WrongTargetError) as caught:
            provider.read(created.id, outs)
        assert "endpoint" in str(caught.value)
        with pytest.raises(WrongTargetError):
            provider.delete(created.id, outs)
    assert [c["cluster_id"] for c in live(emu)] == [created.id]

    monkeypatch.setenv("TOGETHER_BASE_URL", proxy.url)
    assert provider.read(created.id, outs).id == created.id
    provider.delete(created.id, outs)
    assert live(emu) == []
    assert provider.read(created.id, outs).id == ""


# --- point 7: adopt, then a replacing change ----------------------------------------------------


def test_adopt_then_replace_creates_a_new_cluster_instead_of_adopting_the_deleted_one(proxy, emu):
    from together_clusters.provider.client import TogetherClient
    from together_clusters.provider.mapping import create_request

    with TogetherClient(api_key=KEY, base_url=emu.base_url) as direct:
        stray = direct.create_cluster(create_request(inputs(cluster_name="adoptee")))
    provider = ClusterProvider()
    code = inputs(cluster_name="adoptee", adopt_cluster_id=stray.cluster_id)
    checked = provider.check({}, code).inputs
    adopted = provider.create(checked)
    assert adopted.id == stray.cluster_id

    # The engine's steps for a change that forces replacement: check (against the old inputs), diff
    # (against the old outputs), delete, create.
    changed = provider.check(checked, code | {"gpu_type": "H200_SXM"})
    assert changed.failures == []
    plan = provider.diff(adopted.id, adopted.outs, changed.inputs)
    assert plan.replaces and plan.delete_before_replace
    provider.delete(adopted.id, adopted.outs)
    replaced = provider.create(changed.inputs)
    assert replaced.id != stray.cluster_id
    assert [(c["cluster_id"], c["gpu_type"]) for c in live(emu)] == [(replaced.id, "H200_SXM")]
    # And the next preview is quiet.
    again = provider.check(changed.inputs, code | {"gpu_type": "H200_SXM"}).inputs
    assert provider.diff(replaced.id, replaced.outs, again).changes is False


# --- point 5, 11: the preview-time catalog ------------------------------------------------------


def test_the_catalog_is_asked_once_per_process_and_a_malformed_one_does_not_crash_check(proxy):
    provider = ClusterProvider()
    proxy.add(Fault("truncate", method="GET", path="/v1/compute/regions"))
    for name in ("a", "b", "c"):
        assert provider.check({}, inputs(cluster_name=name)).failures == []
    assert proxy.requests.count(("GET", "/v1/compute/regions")) == 1


def test_an_unchanged_cluster_is_not_refused_because_its_region_stopped_offering_it(proxy):
    provider = ClusterProvider()
    olds = inputs(gpu_type="B300_SXM") | {"cluster_id": "c-old"}
    # The emulator's us-central-8 does not offer B300_SXM: a new cluster with it is refused ...
    assert [f.property for f in provider.check({}, inputs(gpu_type="B300_SXM")).failures] == ["gpu_type"]
    # ... but an existing one is not, on a change of something else.
    assert provider.check(olds, inputs(gpu_type="B300_SXM", num_preemptible_gpus=16)).failures == []


def test_a_slow_catalog_is_given_up_quickly_and_the_missing_driver_is_named(proxy):
    proxy.add(Fault("delay", method="GET", path="/v1/compute/regions", delay_s=8))
    no_driver = {k: v for k, v in inputs().items() if k != "nvidia_version_id"}
    (failure,) = ClusterProvider().check({}, no_driver).failures
    assert failure.property == "nvidia_version_id"


def test_without_a_driver_the_regions_newest_is_resolved_at_preview(proxy):
    no_driver = {k: v for k, v in inputs().items() if k != "nvidia_version_id"}
    result = ClusterProvider().check({}, no_driver)
    assert result.failures == []
    regions = proxy._forward.get(f"{proxy.upstream}/v1/compute/regions", headers=proxy.stale_headers).json()
    offered = next(r for r in regions["regions"] if r["name"] == "us-central-8")["driver_versions"]
    newest = max(offered, key=lambda d: [int(p) for p in d["nvidia_driver_version"].split(".")])
    assert result.inputs["nvidia_version_id"] == newest["id"]


# --- point 9: the update wait works from the SDK's node shape (no compute class) ---------------------


def test_an_update_of_num_gpus_returns_only_once_the_new_standard_node_runs(proxy, emu):
    provider = ClusterProvider()
    code = inputs(cluster_name="grow", num_gpus=8, num_preemptible_gpus=8)
    created = provider.create(code)
    (before,) = live(emu)
    assert all("compute_class" not in n for n in before["gpu_worker_nodes"])  # the SDK's shape
    emu.admin.set_speed(60)  # slow enough that the new node is still booting when the PUT returns
    grown = code | {"num_gpus": 16}
    updated = provider.update(created.id, created.outs, grown)
    (after,) = live(emu)
    staying = [n for n in after["gpu_worker_nodes"] if not n.get("marked_for_deletion")]
    phases = [max(n["phase_transitions"], key=lambda t: t["transition_time"])["phase"] for n in staying]
    assert len(staying) == 3 and set(phases) == {"NODE_PHASE_RUNNING"}
    assert updated.outs["num_gpus"] == 16


def test_an_update_whose_reply_is_a_500_after_it_took_effect_ends_in_the_right_state(proxy, emu):
    provider = ClusterProvider()
    code = inputs(cluster_name="put-500")
    created = provider.create(code)
    emu.admin.add_fault(status=500, count=1, method="PUT", path=CLUSTERS, after_commit=True)
    updated = provider.update(created.id, created.outs, code | {"num_preemptible_gpus": 16})
    (cluster,) = live(emu)
    assert updated.outs["num_preemptible_gpus"] == cluster["desired_preemptible_gpus"] == 16


# --- point 6: add-ons round-trip -----------------------------------------------------------------


def test_an_add_on_disabled_outside_pulumi_shows_on_refresh_and_is_enabled_again_in_place(proxy, emu):
    from together_clusters.provider.client import TogetherClient
    from together_clusters.provider.models import ClusterUpdateRequest

    dash = {"name": "dash", "add_on_type": "dashboard", "config": {"dashboard": {"enabled": True}}}
    provider = ClusterProvider()
    code = inputs(cluster_name="addons", add_ons=[dash])
    created = provider.create(code)
    with TogetherClient(api_key=KEY, base_url=emu.base_url) as direct:
        off = ClusterUpdateRequest.model_validate(
            {"add_ons": [{"name": "dash", "config": {"dashboard": {"enabled": False}}}]}
        )
        direct.update_cluster(created.id, off)
    read = provider.read(created.id, created.outs)
    assert read.inputs["add_ons"][0]["config"] == {"dashboard": {"enabled": False}}
    plan = provider.diff(created.id, read.outs, code)
    assert plan.changes and not plan.replaces
    provider.update(created.id, read.outs, code)
    (cluster,) = live(emu)
    assert [(a["name"], a["config"]["dashboard"]["enabled"]) for a in cluster["add_ons"]] == [("dash", True)]


def test_a_reply_that_is_not_the_cluster_asked_for_is_unreadable_not_taken_for_it(proxy, emu):
    from together_clusters.provider.client import TogetherClient
    from together_clusters.provider.errors import UnreadableReplyError

    created = ClusterProvider().create(inputs(cluster_name="itself"))
    emu.admin.add_fault(reply="patch", patch={"cluster_id": None}, method="GET", path=CLUSTERS + "/", count=1)
    with TogetherClient(api_key=KEY, base_url=emu.base_url) as direct:
        with pytest.raises(UnreadableReplyError) as caught:
            direct.get_cluster(created.id, attempts=1)
    assert created.id in str(caught.value)
