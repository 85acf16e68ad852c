"""The dynamic provider's create / read / update / delete against the emulator over real HTTP,
called the way the engine calls them (plain dicts in, results out)."""

from __future__ import annotations

import pytest

from together_clusters.provider import settings
from together_clusters.provider.errors import (
    InputError,
    ProvisioningFailedError,
    WaitTimeoutError,
)
from together_clusters.provider.resource import ClusterProvider, forget_catalog

from .conftest import cluster_inputs

KEY = "lifecycle-test-key"


@pytest.fixture
def admin(emu, monkeypatch):
    monkeypatch.setenv("TOGETHER_BASE_URL", emu.base_url)
    monkeypatch.setenv("TOGETHER_API_KEY", KEY)
    emu.admin.reset()
    emu.admin.set_speed(600)
    # Every engine operation runs in a fresh provider process: no client or catalog carried over.
    settings.forget_clients()
    forget_catalog()
    yield emu.admin
    emu.admin.clear_faults()


def inputs(**overrides) -> dict:
    return cluster_inputs("life", **overrides)


def test_create_waits_for_ready_and_reports_outputs(admin):
    provider = ClusterProvider()
    created = provider.create(inputs())
    outs = created.outs
    assert created.id == outs["cluster_id"]
    assert outs["status"] == "Ready"
    assert outs["num_gpus"] == 8 and outs["num_preemptible_gpus"] == 8
    assert outs["desired_preemptible_gpus"] == 8
    assert outs["standard_nodes"] == 1
    assert outs["kube_config"].startswith("apiVersion")
    assert outs["recent_preemptions"] == 0 and outs["last_preempted_at"] is None
    assert KEY not in repr(outs)


def test_read_sees_out_of_band_changes_but_not_shortfall_or_preemption(admin, emu):
    provider = ClusterProvider()
    olds = inputs()
    created = provider.create(olds)
    state = created.outs

    admin.preempt(created.id, 1)
    admin.set_capacity("us-central-8", "H100_SXM", 0)
    admin.advance(600)
    read = provider.read(created.id, state)
    assert read.outs["recent_preemptions"] == 1
    assert read.outs["last_preempted_at"]
    assert read.outs["allocated_preemptible_gpus"] == 0
    assert read.outs["preemptible_shortfall_gpus"] == 8
    assert provider.diff(created.id, read.outs, olds).changes is False

    from together_clusters.provider.client import TogetherClient
    from together_clusters.provider.models import ClusterUpdateRequest

    with TogetherClient(api_key=KEY, base_url=emu.base_url) as client:
        client.update_cluster(created.id, ClusterUpdateRequest(num_preemptible_gpus=16))
    read = provider.read(created.id, read.outs)
    assert read.inputs["num_preemptible_gpus"] == 16
    drift = provider.diff(created.id, read.outs, olds)
    assert drift.changes is True and drift.replaces == []


def test_update_in_place_converges_standard_nodes(admin):
    provider = ClusterProvider()
    olds = inputs()
    created = provider.create(olds)
    news = inputs(num_gpus=16)
    updated = provider.update(created.id, created.outs, news)
    assert updated.outs["num_gpus"] == 16
    assert updated.outs["standard_nodes"] == 2
    assert [c["cluster_id"] for c in admin.clusters()] == [created.id]


def test_read_of_a_cluster_deleted_out_of_band_leaves_state(admin):
    provider = ClusterProvider()
    created = provider.create(inputs())
    provider.delete(created.id, created.outs)
    read = provider.read(created.id, created.outs)
    assert read.id == "" and read.outs == {}
    # Deleting what is already gone is fine.
    provider.delete(created.id, created.outs)
    assert admin.clusters() == []


@pytest.mark.parametrize("outcome", ["acceptance_tests_failed", "nccl_tests_failed"])
def test_failed_provisioning_leaves_no_cluster_behind(admin, outcome):
    admin.add_provisioning_fault(outcome, count=1)
    # The cleanup's outcome is added to the error, whose type stays: `except ProvisioningFailedError` works.
    with pytest.raises(ProvisioningFailedError) as caught:
        ClusterProvider().create(inputs(cluster_name=f"doomed-{outcome[:4]}"))
    message = str(caught.value)
    assert "FAILED" in message
    assert "was deleted; nothing is left running" in message
    admin.advance(3600)
    assert admin.clusters() == []


def test_create_that_never_gets_ready_times_out_and_cleans_up(admin):
    admin.add_provisioning_fault("stuck", count=1)
    with pytest.raises(WaitTimeoutError) as caught:
        ClusterProvider().create(inputs(cluster_name="stuck", ready_timeout_minutes=0.05))
    assert "not done after 3s" in str(caught.value)
    assert "was deleted; nothing is left running" in str(caught.value)
    admin.advance(3600)
    assert admin.clusters() == []


def test_when_cleanup_fails_too_the_error_gives_the_id_and_the_way_out(admin):
    admin.add_provisioning_fault("acceptance_tests_failed", count=1)
    # Retry-After: 0, so the client's retries of the failing DELETE come at once instead of backing off
    # for ~20 s: what matters here is the error after they are spent.
    admin.add_fault(status=500, count=50, method="DELETE", retry_after=0)
    with pytest.raises(ProvisioningFailedError) as caught:
        ClusterProvider().create(inputs(cluster_name="orphan-risk"))
    (cluster,) = admin.clusters()
    message = str(caught.value)
    assert cluster["cluster_id"] in message
    assert f"adopt_cluster_id='{cluster['cluster_id']}'" in message
    assert f"tg clusters delete {cluster['cluster_id']}" in message


def test_adopt_an_existing_cluster_and_converge_it(admin, emu):
    from together_clusters.provider.client import TogetherClient
    from together_clusters.provider.mapping import create_request

    with TogetherClient(api_key=KEY, base_url=emu.base_url) as client:
        existing = client.create_cluster(
            create_request(inputs(cluster_name="adoptee", num_preemptible_gpus=0))
        )
    admin.advance(3600)
    adopted = ClusterProvider().create(inputs(cluster_name="adoptee", adopt_cluster_id=existing.cluster_id))
    assert adopted.id == existing.cluster_id
    assert adopted.outs["desired_preemptible_gpus"] == 8
    assert len(admin.clusters()) == 1


def test_adoption_refuses_a_cluster_that_does_not_match(admin, emu):
    from together_clusters.provider.client import TogetherClient
    from together_clusters.provider.mapping import create_request

    with TogetherClient(api_key=KEY, base_url=emu.base_url) as client:
        existing = client.create_cluster(create_request(inputs(cluster_name="other", region="us-east-2")))
    with pytest.raises(InputError) as caught:
        ClusterProvider().create(inputs(cluster_name="other", adopt_cluster_id=existing.cluster_id))
    assert "region: live 'us-east-2', code 'us-central-8'" in str(caught.value)


@pytest.mark.parametrize("unique_names", [True, False])
def test_a_killed_up_leaves_a_cluster_the_rerun_refuses_to_duplicate(admin, emu, unique_names):
    """`pulumi up` SIGKILLed while its create waited for Ready: the cluster runs, the state has nothing.

    The rerun creates nothing, whatever the API's name mode, and names the cluster, its age and the
    recovery that needs no code change (before: a second cluster where duplicate names are allowed).
    """
    from together_clusters.provider.client import TogetherClient
    from together_clusters.provider.errors import UntrackedClusterError
    from together_clusters.provider.mapping import create_request

    admin.settings(unique_names=unique_names)
    with TogetherClient(api_key=KEY, base_url=emu.base_url) as client:
        stray = client.create_cluster(create_request(inputs(cluster_name="interrupted")))
    with pytest.raises(UntrackedClusterError) as caught:
        ClusterProvider().create(inputs(cluster_name="interrupted"))
    message = str(caught.value)
    assert caught.value.cluster_id == stray.cluster_id
    assert "\n" not in message
    assert f"adopt_cluster_id='{stray.cluster_id}'" in message
    assert f"pulumi config set adoptClusterId {stray.cluster_id}" in message
    assert f"pulumi config set --path adoptClusterIds.interrupted {stray.cluster_id}" in message
    assert ", created " in message and " ago)" in message
    assert [c["cluster_id"] for c in admin.clusters()] == [stray.cluster_id]
    # The recovery it names works: adopting takes the cluster into the stack.
    adopted = ClusterProvider().create(inputs(cluster_name="interrupted", adopt_cluster_id=stray.cluster_id))
    assert adopted.id == stray.cluster_id


def test_a_cluster_being_deleted_does_not_block_the_create(admin, emu):
    from together_clusters.provider.client import TogetherClient
    from together_clusters.provider.mapping import create_request

    with TogetherClient(api_key=KEY, base_url=emu.base_url) as client:
        old = client.create_cluster(create_request(inputs(cluster_name="replaced")))
        admin.advance(600)
        client.delete_cluster(old.cluster_id)
    made = ClusterProvider().create(inputs(cluster_name="replaced"))
    assert made.id != old.cluster_id


@pytest.mark.parametrize("unique_names", [True, False])
def test_a_create_lost_while_the_listing_lagged_is_found_by_the_next_run(admin, monkeypatch, unique_names):
    """The reply of the POST is lost and the listing lags past the reconcile window: the first run says
    it could not tell; the next run of the stack finds the cluster and refuses to make a second."""
    from together_clusters.provider.errors import AmbiguousCreateError, UntrackedClusterError

    admin.settings(unique_names=unique_names, list_lag_s=3)
    admin.add_fault(reply="drop", method="POST", path="/v1/compute/clusters", count=1)
    monkeypatch.setenv("TOGETHER_RECONCILE_TIMEOUT_S", "0.5")
    with pytest.raises(AmbiguousCreateError):
        ClusterProvider().create(inputs(cluster_name="lagged"))
    (made,) = admin.clusters()
    settings.forget_clients()
    admin.settings(list_lag_s=0)
    with pytest.raises(UntrackedClusterError) as caught:
        ClusterProvider().create(inputs(cluster_name="lagged"))
    assert caught.value.cluster_id == made["cluster_id"]
    assert len(admin.clusters()) == 1


def test_the_reconcile_window_is_the_creates_own_deadline(admin, monkeypatch):
    """A lost reply is looked for as long as the create may take (ready_timeout_minutes), not a fixed
    few seconds: a listing that lags 3 s finds the cluster in the same run."""
    from together_clusters.provider.client import TogetherClient

    windows: list[float] = []
    reconcile = TogetherClient.reconcile

    def spy(self, name, before, cause, timeout_s):
        windows.append(timeout_s)
        return reconcile(self, name, before, cause, timeout_s)

    monkeypatch.setattr(TogetherClient, "reconcile", spy)
    monkeypatch.delenv("TOGETHER_RECONCILE_TIMEOUT_S", raising=False)
    admin.settings(list_lag_s=3)  # the emulator's timestamps are wall-clock: 3 real seconds
    admin.add_fault(reply="drop", method="POST", path="/v1/compute/clusters", count=1)
    made = ClusterProvider().create(inputs(cluster_name="slow-listing", ready_timeout_minutes=2))
    assert windows == [120.0]
    assert [c["cluster_id"] for c in admin.clusters()] == [made.id]


def test_preview_checks_region_gpu_type_and_driver_against_the_catalog(admin):
    def failures(**overrides):
        result = ClusterProvider().check({}, inputs(**overrides))
        return {f.property: f.reason for f in result.failures}

    assert failures() == {}
    assert failures(region="mars-1")["region"].startswith("region 'mars-1' is not offered; use one of ")
    assert failures(region="us-east-2", gpu_type="B200_SXM")["gpu_type"] == (
        "gpu_type 'B200_SXM' is not offered in region us-east-2; it offers H100_SXM, L40_PCIE, RTX_6000_PCI. "
        "Pick one of those or another region."
    )
    assert (
        "is not offered in region us-central-8; use one of nv-"
        in failures(nvidia_version_id="nv-1")["nvidia_version_id"]
    )


def test_preview_does_not_wait_on_an_unreachable_api(admin, monkeypatch):
    """The API checks the same at create; an API that is down must not fail or stall a preview."""
    monkeypatch.setenv("TOGETHER_BASE_URL", "http://127.0.0.1:9")
    assert ClusterProvider().check({}, inputs(region="mars-1")).failures == []


def test_create_sends_a_project_id_the_stacks_else_the_keys(admin, monkeypatch):
    from together_clusters.provider.client import TogetherClient

    sent: list[str | None] = []
    original = TogetherClient.create_cluster

    def spy(self, request, *args, **kwargs):
        sent.append(request.project_id)
        return original(self, request, *args, **kwargs)

    monkeypatch.setattr(TogetherClient, "create_cluster", spy)
    provider = ClusterProvider()
    outs = provider.create(inputs(cluster_name="p1")).outs
    assert sent == [outs["api_project_id"]] and sent[0]
    provider.create(inputs(cluster_name="p2", project_id="proj-chosen"))
    assert sent[1] == "proj-chosen"


def test_a_replacement_gets_the_lifecycle_independent_inline_volume_back(admin):
    """The old cluster's independent volume is available again once it is gone: the new one attaches it."""
    provider = ClusterProvider()
    shared = {
        "region": "us-central-8",
        "size_tib": 1,
        "volume_name": "kept-ckpt",
        "is_lifecycle_independent": True,
    }
    first = provider.create(inputs(cluster_name="inline-1", shared_volume=shared))
    [volume] = admin.volumes()
    provider.delete(first.id, first.outs)
    second = provider.create(inputs(cluster_name="inline-1", gpu_type="H200_SXM", shared_volume=shared))
    [again] = admin.volumes()
    assert again["volume_id"] == volume["volume_id"] and again["cluster_id"] == second.id


def test_the_rerun_of_a_cut_off_replacement_of_an_adopted_cluster_names_the_replacement(admin, emu):
    """An adopted cluster was replaced (deleted first, same name) and the new one's create was cut off:
    the stack holds nothing and the code still names the deleted cluster. The rerun names the replacement
    to adopt, instead of only saying the adopted one is gone (which no config change could get past)."""
    from together_clusters.provider.client import TogetherClient
    from together_clusters.provider.errors import UntrackedClusterError
    from together_clusters.provider.mapping import create_request

    with TogetherClient(api_key=KEY, base_url=emu.base_url) as client:
        adopted = client.create_cluster(create_request(inputs(cluster_name="readopt")))
        admin.advance(600)
        client.delete_cluster(adopted.cluster_id)
        admin.advance(600)
        replacement = client.create_cluster(create_request(inputs(cluster_name="readopt")))
    with pytest.raises(UntrackedClusterError) as caught:
        ClusterProvider().create(inputs(cluster_name="readopt", adopt_cluster_id=adopted.cluster_id))
    assert caught.value.cluster_id == replacement.cluster_id
    with pytest.raises(InputError, match="no such live cluster"):
        ClusterProvider().create(inputs(cluster_name="nothing-else", adopt_cluster_id=adopted.cluster_id))


def _driver_failure(**env) -> str:
    settings.forget_clients()
    forget_catalog()
    no_driver = {k: v for k, v in inputs().items() if k != "nvidia_version_id"}
    failures = {f.property: f.reason for f in ClusterProvider().check({}, no_driver).failures}
    return failures["nvidia_version_id"]


def test_a_preview_that_cannot_ask_the_api_says_why_and_what_to_set(admin, monkeypatch):
    """Before: every cause read 'the catalog of region ... could not be read ... set nvidia_version_id'."""
    monkeypatch.delenv("TOGETHER_API_KEY")
    missing = _driver_failure()
    assert missing.startswith("No Together API key: set TOGETHER_API_KEY") and "together:apiKey" in missing

    monkeypatch.setenv("TOGETHER_API_KEY", KEY)
    admin.add_fault(status=401, path="/v1/compute/regions", message="invalid API key")
    refused = _driver_failure()
    assert "refused the API key (HTTP 401: invalid API key)" in refused and "TOGETHER_API_KEY" in refused

    monkeypatch.setenv("TOGETHER_BASE_URL", "http://127.0.0.1:9")
    down = _driver_failure()
    assert "http://127.0.0.1:9 could not be reached" in down and "TOGETHER_BASE_URL" in down
    for message in (missing, refused, down):
        assert "\n" not in message and "nvidia_version_id" in message


def test_a_scale_up_keeps_the_driver_the_first_check_resolved(admin):
    """Before: the checked inputs of a scale-up lacked the driver picked at create, so the engine's diff
    showed `-nvidia_version_id` although nothing changes it."""
    provider = ClusterProvider()
    no_driver = {k: v for k, v in inputs().items() if k != "nvidia_version_id"}
    first = provider.check({}, no_driver)
    assert first.inputs["nvidia_version_id"] == "nv-570-cu128-ubuntu2204"
    scaled = provider.check(first.inputs, no_driver | {"num_gpus": 16})
    assert scaled.failures == []
    assert scaled.inputs["nvidia_version_id"] == first.inputs["nvidia_version_id"]
    assert provider.diff("id", first.inputs, scaled.inputs).replaces == []


def test_server_filled_fields_are_never_a_change_after_create_or_refresh(admin):
    """Together's Terraform provider (through together-go) plans a replacement on the very next plan of a
    cluster created without project_id: the server fills it and the attribute is not computed. Ours leaves
    every field the server fills (project, driver and versions, cluster type, reserved and pool shares) to it."""
    provider = ClusterProvider()
    code = {
        k: v
        for k, v in inputs().items()
        if k not in ("nvidia_version_id", "cluster_type", "billing_type", "project_id")
    }
    checked = provider.check({}, code).inputs
    created = provider.create(checked)
    refreshed = provider.read(created.id, created.outs)
    again = provider.check(refreshed.inputs, code).inputs
    diff = provider.diff(created.id, refreshed.outs, again)
    assert (diff.changes, diff.replaces) == (False, [])


def test_an_autoscaling_cluster_grown_by_the_platform_updates_and_refreshes_without_undoing_it(admin):
    provider = ClusterProvider()
    olds = inputs(auto_scale=True, auto_scale_max_gpus=32, num_preemptible_gpus=0)
    created = provider.create(olds)
    admin.set_demand(created.id, pending_gpus=16)
    admin.advance(120)  # past the platform's provisioning delay: two standard nodes added
    grown = provider.read(created.id, created.outs)
    assert grown.outs["standard_nodes"] == 3
    assert grown.inputs["num_gpus"] == 8  # the platform's growth is not drift
    assert provider.diff(created.id, grown.outs, olds).changes is False
    # A change of the preemptible target waits for nothing the added nodes could block.
    updated = provider.update(created.id, grown.outs, olds | {"num_preemptible_gpus": 8})
    assert updated.outs["num_gpus"] == 8 and updated.outs["standard_nodes"] == 3
